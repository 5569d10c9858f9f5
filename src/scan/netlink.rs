//! Netlink framing shared by the proc connector ([`super::events`]) and
//! socket diagnostics ([`super::sockdiag`]): the message header, its
//! alignment, the message types both meet, and reading native-endian
//! integers out of a datagram without panicking. The numbers come from
//! `libc` (already a dependency); rustix has none of them.

/// `NLMSG_HDRLEN`: `struct nlmsghdr` (len, type, flags, seq, pid).
pub const HDRLEN: usize = size_of::<libc::nlmsghdr>();
/// `NLMSG_ERROR`: the payload is a `struct nlmsgerr` (a negative errno first).
pub const ERROR: u16 = u16_of(libc::NLMSG_ERROR);
/// `NLMSG_DONE`.
pub const DONE: u16 = u16_of(libc::NLMSG_DONE);
/// `NLM_F_REQUEST`.
pub const F_REQUEST: u16 = u16_of(libc::NLM_F_REQUEST);

/// A header field from libc's `c_int`; out of range fails the build.
#[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)] // checked just before
const fn u16_of(v: libc::c_int) -> u16 {
    assert!(matches!(v, 0..=0xffff));
    v as u16
}

/// `NLMSG_ALIGN` (and `NLA_ALIGN`): the next multiple of 4. libc's works
/// on `c_int`, which a `u32` length from a datagram does not fit.
pub fn align(len: usize) -> usize {
    (len + 3) & !3
}

/// Appends a `struct nlmsghdr`.
pub fn push_header(m: &mut Vec<u8>, len: u32, kind: u16, flags: u16, seq: u32, pid: u32) {
    m.extend_from_slice(&len.to_ne_bytes());
    m.extend_from_slice(&kind.to_ne_bytes());
    m.extend_from_slice(&flags.to_ne_bytes());
    m.extend_from_slice(&seq.to_ne_bytes());
    m.extend_from_slice(&pid.to_ne_bytes());
}

/// The length and type of the message `b` starts with, if its header is there.
pub fn header(b: &[u8]) -> Option<(usize, u16)> {
    Some((u32_at(b, 0)? as usize, u16_at(b, 4)?))
}

pub fn u16_at(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_ne_bytes(b.get(at..at.checked_add(2)?)?.try_into().ok()?))
}

pub fn u32_at(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_ne_bytes(b.get(at..at.checked_add(4)?)?.try_into().ok()?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_is_the_kernels_and_reads_never_panic() {
        assert_eq!((HDRLEN, ERROR, DONE, F_REQUEST), (16, 2, 3, 1));
        let mut m = Vec::new();
        push_header(&mut m, 20, DONE, F_REQUEST, 7, 9);
        assert_eq!(m.len(), HDRLEN);
        assert_eq!(header(&m), Some((20, DONE)));
        assert_eq!((u32_at(&m, 8), u32_at(&m, 12), u32_at(&m, 13)), (Some(7), Some(9), None));
        assert_eq!((header(&m[..5]), u16_at(&m, usize::MAX)), (None, None));
        assert_eq!((align(0), align(1), align(4), align(17)), (0, 4, 4, 20));
    }
}
