//! Slurm's compressed host lists (`SLURM_STEP_NODELIST`): the first host.
//!
//! A list is comma-separated entries; an entry may hold bracketed groups of
//! numbers and ranges, `node[01-03,07]` being `node01 node02 node03 node07`
//! and `r[1-2]n[1-4]` eight hosts. Under `srun` rank 0 runs on the first
//! host of its step's list (block and cyclic distributions), which is where
//! the coordinator then listens.

/// The first host `list` names, or `None` when it is not a host list.
pub(crate) fn first_host(list: &str) -> Option<String> {
    let mut host = String::new();
    let mut chars = list.trim().chars();
    while let Some(c) = chars.next() {
        match c {
            ',' => break,
            '[' => {
                // The group's first element: up to its first ',' or '-'.
                let mut first = String::new();
                let mut in_first = true;
                loop {
                    match chars.next()? {
                        ']' => break,
                        ',' | '-' => in_first = false,
                        d if d.is_ascii_digit() => {
                            if in_first {
                                first.push(d);
                            }
                        }
                        _ => return None,
                    }
                }
                if first.is_empty() {
                    return None;
                }
                host.push_str(&first);
            }
            c if c.is_ascii_alphanumeric() || "-_.".contains(c) => host.push(c),
            _ => return None,
        }
    }
    (!host.is_empty()).then_some(host)
}

#[cfg(test)]
mod tests {
    use super::first_host;

    #[test]
    fn the_first_host_of_a_list() {
        assert_eq!(first_host("n1").as_deref(), Some("n1"));
        assert_eq!(first_host("node[07-09,11],gpu3").as_deref(), Some("node07"));
        assert_eq!(first_host("gpu3,node[07-09]").as_deref(), Some("gpu3"));
        assert_eq!(first_host("r[2-3]n[01-04]").as_deref(), Some("r2n01"));
        assert_eq!(first_host("c-[5,1]").as_deref(), Some("c-5"));
        assert_eq!(first_host("h.example.org").as_deref(), Some("h.example.org"));
        for bad in ["", ",n1", "node[", "node[]", "node[a-b]", "n 1", "n[1]x]"] {
            assert_eq!(first_host(bad), None, "{bad:?}");
        }
    }
}
