//! Shared-secret handshake: HMAC-SHA-256 over both sides' nonces.
//!
//! The coordinator's challenge carries a fresh nonce; the member answers with
//! its own nonce and `HMAC(secret, "rrddmma-ctrl hello" ‖ coordinator nonce ‖
//! member nonce ‖ rank ‖ size)`; the coordinator proves itself back with
//! `HMAC(secret, "rrddmma-ctrl welcome" ‖ member nonce ‖ coordinator nonce)`.
//! The secret never crosses the wire and a recorded handshake does not
//! replay, since each side's nonce is fresh. Frames after the handshake are
//! not authenticated: the secret keeps strangers and misconfigured jobs out,
//! it does not defend against an attacker on the path.

use sha2::{Digest, Sha256};

use super::wire::{MAC_LEN, NONCE_LEN};

const BLOCK: usize = 64;

/// HMAC-SHA-256 of the concatenation of `parts` (RFC 2104).
pub fn hmac(key: &[u8], parts: &[&[u8]]) -> [u8; MAC_LEN] {
    let mut k = [0u8; BLOCK];
    if key.len() > BLOCK {
        k[..32].copy_from_slice(&Sha256::digest(key));
    } else {
        k[..key.len()].copy_from_slice(key);
    }
    let mut inner = Sha256::new();
    inner.update(k.map(|b| b ^ 0x36));
    for p in parts {
        inner.update(p);
    }
    let mut outer = Sha256::new();
    outer.update(k.map(|b| b ^ 0x5c));
    outer.update(inner.finalize());
    outer.finalize().into()
}

/// The member's MAC in its hello.
pub fn hello_mac(
    secret: &[u8],
    coordinator: &[u8; NONCE_LEN],
    member: &[u8; NONCE_LEN],
    rank: u32,
    size: u32,
) -> [u8; MAC_LEN] {
    hmac(secret, &[b"rrddmma-ctrl hello", coordinator, member, &rank.to_be_bytes(), &size.to_be_bytes()])
}

/// The coordinator's MAC in its welcome.
pub fn welcome_mac(secret: &[u8], member: &[u8; NONCE_LEN], coordinator: &[u8; NONCE_LEN]) -> [u8; MAC_LEN] {
    hmac(secret, &[b"rrddmma-ctrl welcome", member, coordinator])
}

/// Compares MACs in time independent of where they differ.
pub fn mac_eq(a: &[u8; MAC_LEN], b: &[u8; MAC_LEN]) -> bool {
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// Fills `buf` from the kernel's random source with getrandom(2): no file
/// to open (so it works where `/dev` is not mounted) and no new dependency.
/// It blocks only until the kernel's pool is first initialised at boot.
#[allow(unsafe_code)]
pub fn os_random(buf: &mut [u8]) -> std::io::Result<()> {
    let mut done = 0;
    while done < buf.len() {
        let rest = &mut buf[done..];
        // SAFETY: `rest` is a live, writable buffer of `rest.len()` bytes;
        // getrandom(2) writes at most that many.
        let n = unsafe { libc::getrandom(rest.as_mut_ptr().cast(), rest.len(), 0) };
        if n < 0 {
            let e = std::io::Error::last_os_error();
            if e.kind() == std::io::ErrorKind::Interrupted {
                continue;
            }
            return Err(e);
        }
        done += n as usize;
    }
    Ok(())
}

/// A fresh nonce from the kernel's random source.
pub fn nonce() -> std::io::Result<[u8; NONCE_LEN]> {
    let mut n = [0u8; NONCE_LEN];
    os_random(&mut n)?;
    Ok(n)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hex(b: &[u8]) -> String {
        b.iter().map(|x| format!("{x:02x}")).collect()
    }

    #[test]
    fn os_randomness_differs() {
        let (a, b) = (nonce().unwrap(), nonce().unwrap());
        assert_ne!(a, b);
        assert_ne!(a, [0; NONCE_LEN]);
        let mut big = vec![0u8; 1 << 20];
        os_random(&mut big).unwrap();
        assert!(big.iter().filter(|b| **b == 0).count() < 8192);
    }

    #[test]
    fn rfc4231_vectors() {
        // Test case 1.
        let mac = hmac(&[0x0b; 20], &[b"Hi There"]);
        assert_eq!(hex(&mac), "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7");
        // Test case 2, split across parts.
        let mac = hmac(b"Jefe", &[b"what do ya want ", b"for nothing?"]);
        assert_eq!(hex(&mac), "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
        // Test case 6: a key longer than the block.
        let mac = hmac(&[0xaa; 131], &[b"Test Using Larger Than Block-Size Key - Hash Key First"]);
        assert_eq!(hex(&mac), "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54");
    }

    #[test]
    fn macs_bind_every_input() {
        let (c, m) = ([1; NONCE_LEN], [2; NONCE_LEN]);
        let base = hello_mac(b"s", &c, &m, 1, 3);
        assert!(mac_eq(&base, &hello_mac(b"s", &c, &m, 1, 3)));
        assert!(!mac_eq(&base, &hello_mac(b"t", &c, &m, 1, 3)));
        assert!(!mac_eq(&base, &hello_mac(b"s", &m, &c, 1, 3)));
        assert!(!mac_eq(&base, &hello_mac(b"s", &c, &m, 2, 3)));
        assert!(!mac_eq(&base, &hello_mac(b"s", &c, &m, 1, 4)));
        assert!(!mac_eq(&welcome_mac(b"s", &m, &c), &welcome_mac(b"s", &c, &m)));
        assert_ne!(nonce().unwrap(), nonce().unwrap());
    }
}
