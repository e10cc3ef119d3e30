//! Small fd helpers: an eventfd wake-up.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

/// A non-blocking eventfd: a wake-up that poll/epoll see as readable.
pub(crate) struct EventFd(OwnedFd);

impl EventFd {
    pub(crate) fn new() -> io::Result<EventFd> {
        // SAFETY: plain syscall; the returned fd is checked and owned below.
        let fd = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: fd is a fresh descriptor we own.
        Ok(EventFd(unsafe { OwnedFd::from_raw_fd(fd) }))
    }

    pub(crate) fn signal(&self) {
        let one: u64 = 1;
        // SAFETY: writes 8 bytes from a valid u64 to our eventfd; EAGAIN (counter saturated)
        // still leaves it readable, which is all a wake-up needs.
        unsafe {
            libc::write(
                self.0.as_raw_fd(),
                &one as *const u64 as *const libc::c_void,
                8,
            );
        }
    }

    pub(crate) fn drain(&self) -> u64 {
        let mut v: u64 = 0;
        // SAFETY: reads 8 bytes into a valid u64 from our non-blocking eventfd.
        let n = unsafe {
            libc::read(
                self.0.as_raw_fd(),
                &mut v as *mut u64 as *mut libc::c_void,
                8,
            )
        };
        if n == 8 {
            v
        } else {
            0
        }
    }

    pub(crate) fn fd(&self) -> RawFd {
        self.0.as_raw_fd()
    }
}
