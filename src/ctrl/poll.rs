//! Waiting for readable sockets: a thin `poll(2)`.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::time::Duration;

/// Waits until one of `fds` is readable (or hung up) or `timeout` passes;
/// returns which are ready. An interrupted wait returns with none ready.
pub fn readable(fds: &[RawFd], timeout: Duration) -> io::Result<Vec<bool>> {
    let mut p: Vec<libc::pollfd> =
        fds.iter().map(|&fd| libc::pollfd { fd, events: libc::POLLIN, revents: 0 }).collect();
    // Round up so that a deadline is never undershot by a truncated millisecond.
    let ms = timeout.as_micros().div_ceil(1000).min(i32::MAX as u128) as i32;
    // SAFETY: `p` is a valid, exclusively borrowed array of `p.len()` pollfd
    // structs for the whole call; poll only writes their `revents`.
    let n = unsafe { libc::poll(p.as_mut_ptr(), p.len() as libc::nfds_t, ms) };
    if n < 0 {
        let e = io::Error::last_os_error();
        if e.kind() == io::ErrorKind::Interrupted {
            return Ok(vec![false; fds.len()]);
        }
        return Err(e);
    }
    Ok(p.iter().map(|x| x.revents & (libc::POLLIN | libc::POLLHUP | libc::POLLERR) != 0).collect())
}

/// The descriptor of a socket, for [`readable`].
pub fn fd(s: &impl AsRawFd) -> RawFd {
    s.as_raw_fd()
}

/// A new epoll instance (close-on-exec).
pub fn epoll() -> io::Result<OwnedFd> {
    // SAFETY: no pointer arguments; the result is checked.
    let fd = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: a descriptor just returned by epoll_create1, owned by nothing else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Adds `fd` to `epoll`, readable or hung up (level-triggered). A closed
/// `fd` leaves the set by itself.
pub fn watch(epoll: &OwnedFd, fd: RawFd) -> io::Result<()> {
    let mut ev = libc::epoll_event { events: (libc::EPOLLIN | libc::EPOLLRDHUP) as u32, u64: fd as u64 };
    // SAFETY: `epoll` is an open epoll instance and `fd` an open descriptor
    // the caller owns; `ev` is valid for the call.
    let rc = unsafe { libc::epoll_ctl(epoll.as_raw_fd(), libc::EPOLL_CTL_ADD, fd, &mut ev) };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}
