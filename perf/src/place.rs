//! Where the benchmark runs: `--cpu N` pins it to one CPU, `--numa` to the
//! CPUs of the device's NUMA node.
//!
//! Pinning happens before the buffers are allocated and registered, and
//! registration faults the pages in from the pinned thread, so under the
//! kernel's default (first-touch) policy the buffers land on the pinned
//! CPUs' node. Threads started later inherit the mask.

/// The CPUs in a sysfs list such as `0-3,8,10-11`.
pub fn parse_cpulist(text: &str) -> Result<Vec<usize>, String> {
    let mut v = Vec::new();
    for part in text.trim().split(',').filter(|p| !p.is_empty()) {
        let bad = || format!("malformed CPU list {text:?}");
        match part.split_once('-') {
            Some((a, b)) => {
                let (a, b): (usize, usize) = (a.parse().map_err(|_| bad())?, b.parse().map_err(|_| bad())?);
                if a > b {
                    return Err(bad());
                }
                v.extend(a..=b);
            }
            None => v.push(part.parse().map_err(|_| bad())?),
        }
    }
    Ok(v)
}

/// The NUMA node of RDMA device `dev`, if the kernel reports one.
pub fn device_node(dev: &str) -> Option<u32> {
    let t = std::fs::read_to_string(format!("/sys/class/infiniband/{dev}/device/numa_node")).ok()?;
    t.trim().parse::<i32>().ok().and_then(|n| u32::try_from(n).ok())
}

/// The CPUs of NUMA node `node`.
pub fn node_cpus(node: u32) -> Result<Vec<usize>, String> {
    let path = format!("/sys/devices/system/node/node{node}/cpulist");
    let t = std::fs::read_to_string(&path).map_err(|e| format!("cannot read {path}: {e}"))?;
    parse_cpulist(&t)
}

/// Restricts the calling thread (and the threads it starts later) to `cpus`.
pub fn pin(cpus: &[usize]) -> Result<(), String> {
    // SAFETY: cpu_set_t is plain data; all-zero is the empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    let max = 8 * std::mem::size_of::<libc::cpu_set_t>();
    for &c in cpus {
        if c >= max {
            return Err(format!("CPU {c} is beyond the {max} CPUs a cpu_set_t holds"));
        }
        // SAFETY: `c` is below the set's capacity (checked above).
        unsafe { libc::CPU_SET(c, &mut set) };
    }
    // SAFETY: `set` is a valid cpu_set_t of the size passed; pid 0 is this thread.
    let rc = unsafe { libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) };
    if rc != 0 {
        return Err(format!(
            "cannot pin to CPU(s) {cpus:?}: {} (is the CPU online and allowed to this process?)",
            std::io::Error::last_os_error()
        ));
    }
    Ok(())
}

/// The CPUs this thread may run on now.
pub fn current() -> Vec<usize> {
    // SAFETY: as in `pin`.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: `set` is writable and of the size passed.
    if unsafe { libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) } != 0 {
        return Vec::new();
    }
    let max = 8 * std::mem::size_of::<libc::cpu_set_t>();
    // SAFETY: every index is below the set's capacity.
    (0..max).filter(|&c| unsafe { libc::CPU_ISSET(c, &set) }).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_lists_parse() {
        assert_eq!(parse_cpulist("0-3,8,10-11\n").unwrap(), vec![0, 1, 2, 3, 8, 10, 11]);
        assert_eq!(parse_cpulist("5").unwrap(), vec![5]);
        assert!(parse_cpulist("3-1").is_err());
        assert!(parse_cpulist("a").is_err());
    }

    #[test]
    fn pinning_takes_effect() {
        let before = current();
        let first = before[0];
        std::thread::spawn(move || {
            pin(&[first]).unwrap();
            assert_eq!(current(), vec![first]);
            assert!(pin(&[100_000]).unwrap_err().contains("beyond"));
        })
        .join()
        .unwrap();
    }
}
