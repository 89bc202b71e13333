//! The rendezvous wire format: length-prefixed, versioned frames.
//!
//! Every frame starts with a 12-byte header, all integers big-endian:
//!
//! | bytes | field |
//! |---|---|
//! | 0..4 | magic `RDMC` |
//! | 4 | protocol version ([`VERSION`]) |
//! | 5 | frame kind ([`Kind`]) |
//! | 6..8 | reserved, zero |
//! | 8..12 | payload length |
//!
//! The decoder refuses a length above its cap as soon as the header is in,
//! before buffering any of the payload, so a peer cannot make it allocate
//! more than the cap. A [`Kind::Reject`] frame keeps its layout in every
//! version, so peers of different versions can still tell each other why.

use super::error::{Error, RejectCode};

/// Protocol version this build speaks.
pub const VERSION: u8 = 1;
/// Frame magic.
pub const MAGIC: [u8; 4] = *b"RDMC";
/// Header length.
pub const HEADER_LEN: usize = 12;
/// Length of nonces in the handshake.
pub const NONCE_LEN: usize = 16;
/// Length of handshake MACs (HMAC-SHA-256).
pub const MAC_LEN: usize = 32;
/// Longest reject message carried (longer ones are cut).
pub const MAX_REASON: usize = 256;
/// Largest payload of a frame the coordinator sends before it admits a
/// member (a [`Kind::Reject`] with the longest reason; a challenge and a
/// welcome are smaller): a member caps its frames at this size until it is
/// welcomed, so a stranger posing as the coordinator cannot make it buffer
/// up to `max_frame`.
pub const HANDSHAKE_MAX: usize = 1 + 4 + MAX_REASON;

/// Frame kinds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum Kind {
    /// Coordinator → member, first frame: a nonce and whether a secret is required.
    Challenge = 1,
    /// Member → coordinator: rank, size, nonce and MAC.
    Hello = 2,
    /// Coordinator → member: admission, with the coordinator's MAC.
    Welcome = 3,
    /// Member → coordinator: this rank's part of a collective round.
    Contribute = 4,
    /// Coordinator → member: every rank's part of a round.
    Gathered = 5,
    /// Either way: refusal or failure, then the connection closes.
    Reject = 6,
}

impl Kind {
    fn from_u8(v: u8) -> Option<Kind> {
        Some(match v {
            1 => Kind::Challenge,
            2 => Kind::Hello,
            3 => Kind::Welcome,
            4 => Kind::Contribute,
            5 => Kind::Gathered,
            6 => Kind::Reject,
            _ => return None,
        })
    }
}

/// A decoded message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Msg {
    /// See [`Kind::Challenge`].
    Challenge {
        /// Coordinator nonce.
        nonce: [u8; NONCE_LEN],
        /// Whether the coordinator requires the shared secret.
        auth: bool,
    },
    /// See [`Kind::Hello`].
    Hello {
        /// The member's rank.
        rank: u32,
        /// The cluster size the member expects.
        size: u32,
        /// Member nonce.
        nonce: [u8; NONCE_LEN],
        /// MAC over both nonces, rank and size (zero without a secret).
        mac: [u8; MAC_LEN],
    },
    /// See [`Kind::Welcome`].
    Welcome {
        /// MAC over both nonces (zero without a secret).
        mac: [u8; MAC_LEN],
    },
    /// See [`Kind::Contribute`].
    Contribute {
        /// Round number, counting from 0.
        round: u32,
        /// This rank's bytes.
        data: Vec<u8>,
    },
    /// See [`Kind::Gathered`].
    Gathered {
        /// Round number.
        round: u32,
        /// One entry per rank, in rank order.
        parts: Parts,
    },
    /// See [`Kind::Reject`].
    Reject {
        /// Why.
        code: RejectCode,
        /// A number qualifying the code (a version, a rank, a size).
        detail: u32,
        /// Human-readable text.
        reason: String,
    },
}

impl Msg {
    /// Encodes the message as one frame (header included).
    pub fn encode(&self) -> Vec<u8> {
        let mut p = Vec::new();
        let kind = match self {
            Msg::Challenge { nonce, auth } => {
                p.extend_from_slice(nonce);
                p.push(u8::from(*auth));
                Kind::Challenge
            }
            Msg::Hello { rank, size, nonce, mac } => {
                p.extend_from_slice(&rank.to_be_bytes());
                p.extend_from_slice(&size.to_be_bytes());
                p.extend_from_slice(nonce);
                p.extend_from_slice(mac);
                Kind::Hello
            }
            Msg::Welcome { mac } => {
                p.extend_from_slice(mac);
                Kind::Welcome
            }
            Msg::Contribute { round, data } => {
                p.extend_from_slice(&round.to_be_bytes());
                p.extend_from_slice(data);
                Kind::Contribute
            }
            Msg::Gathered { round, parts } => return encode_gathered(*round, parts.iter()),
            Msg::Reject { code, detail, reason } => {
                p.push(*code as u8);
                p.extend_from_slice(&detail.to_be_bytes());
                let mut end = reason.len().min(MAX_REASON);
                while !reason.is_char_boundary(end) {
                    end -= 1;
                }
                p.extend_from_slice(&reason.as_bytes()[..end]);
                Kind::Reject
            }
        };
        let mut f = header(kind, p.len());
        f.extend_from_slice(&p);
        f
    }

    /// Parses the payload of a frame of `kind`.
    fn parse(kind: Kind, p: &[u8]) -> Result<Msg, Error> {
        let mut r = Reader { b: p };
        let msg = match kind {
            Kind::Challenge => {
                let nonce = r.array("challenge nonce")?;
                let auth = match r.u8("challenge flag")? {
                    0 => false,
                    1 => true,
                    _ => return Err(Error::Malformed("challenge flag is neither 0 nor 1")),
                };
                Msg::Challenge { nonce, auth }
            }
            Kind::Hello => Msg::Hello {
                rank: r.u32("hello rank")?,
                size: r.u32("hello size")?,
                nonce: r.array("hello nonce")?,
                mac: r.array("hello MAC")?,
            },
            Kind::Welcome => Msg::Welcome { mac: r.array("welcome MAC")? },
            Kind::Contribute => {
                let round = r.u32("contribution round")?;
                Msg::Contribute { round, data: r.rest().to_vec() }
            }
            Kind::Gathered => {
                let round = r.u32("gathered round")?;
                let n = r.u32("gathered count")? as usize;
                // Each part costs at least its 4-byte length: bound n before allocating.
                if n > r.b.len() / 4 {
                    return Err(Error::Malformed("gathered count exceeds the frame"));
                }
                // One end offset (4 bytes) per part, as the frame's own length
                // field, and the parts' bytes, which the frame holds too: what
                // this keeps is never larger than the frame, whatever `n` says.
                let mut parts = Parts { bytes: Vec::with_capacity(r.b.len() - 4 * n), ends: Vec::with_capacity(n) };
                for _ in 0..n {
                    let len = r.u32("gathered part length")? as usize;
                    parts.push(r.take(len, "gathered part")?);
                }
                Msg::Gathered { round, parts }
            }
            Kind::Reject => {
                let code = RejectCode::from_u8(r.u8("reject code")?);
                let detail = r.u32("reject detail")?;
                let rest = r.rest();
                let rest = &rest[..rest.len().min(MAX_REASON)];
                // Replacement characters can make the text longer than its bytes: cut again.
                let mut reason = String::from_utf8_lossy(rest).into_owned();
                let mut end = reason.len().min(MAX_REASON);
                while !reason.is_char_boundary(end) {
                    end -= 1;
                }
                reason.truncate(end);
                Msg::Reject { code, detail, reason }
            }
        };
        if !r.b.is_empty() {
            return Err(Error::Malformed("trailing bytes after the message"));
        }
        Ok(msg)
    }
}

/// A frame header for a payload of `len` bytes, with room for the payload.
fn header(kind: Kind, len: usize) -> Vec<u8> {
    let mut f = Vec::with_capacity(HEADER_LEN + len);
    f.extend_from_slice(&MAGIC);
    f.push(VERSION);
    f.push(kind as u8);
    f.extend_from_slice(&[0, 0]);
    f.extend_from_slice(&(len as u32).to_be_bytes());
    f
}

/// Encodes a [`Kind::Gathered`] frame of `parts` without building a [`Msg`]
/// (the coordinator keeps its own copy of the parts).
pub fn encode_gathered<P: AsRef<[u8]>>(round: u32, parts: impl IntoIterator<Item = P> + Clone) -> Vec<u8> {
    let len = 8 + parts.clone().into_iter().map(|p| 4 + p.as_ref().len()).sum::<usize>();
    let mut f = header(Kind::Gathered, len);
    f.extend_from_slice(&round.to_be_bytes());
    f.extend_from_slice(&(parts.clone().into_iter().count() as u32).to_be_bytes());
    for part in parts {
        let part = part.as_ref();
        f.extend_from_slice(&(part.len() as u32).to_be_bytes());
        f.extend_from_slice(part);
    }
    f
}

/// The parts of a [`Msg::Gathered`], kept compactly: every part's bytes in
/// one buffer and one 4-byte end offset per part. Its memory is at most the
/// frame's payload, however many parts the frame declares (a `Vec<Vec<u8>>`
/// would cost 24 bytes per part, six times the 4 bytes a part costs on the
/// wire). [`Parts::to_vecs`] gives one `Vec` per part once the count is
/// known to be right.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Parts {
    bytes: Vec<u8>,
    ends: Vec<u32>,
}

impl Parts {
    /// The parts of `parts`, copied.
    pub fn from_slices<P: AsRef<[u8]>>(parts: &[P]) -> Parts {
        let mut p = Parts {
            bytes: Vec::with_capacity(parts.iter().map(|x| x.as_ref().len()).sum()),
            ends: Vec::with_capacity(parts.len()),
        };
        for x in parts {
            p.push(x.as_ref());
        }
        p
    }

    fn push(&mut self, part: &[u8]) {
        self.bytes.extend_from_slice(part);
        // A frame's payload length is a u32, so every offset into it fits.
        self.ends.push(u32::try_from(self.bytes.len()).expect("a frame's parts fit in its u32 length"));
    }

    /// Number of parts.
    pub fn len(&self) -> usize {
        self.ends.len()
    }

    /// Whether there are no parts.
    pub fn is_empty(&self) -> bool {
        self.ends.is_empty()
    }

    /// Part `i`, if there is one.
    pub fn get(&self, i: usize) -> Option<&[u8]> {
        let end = *self.ends.get(i)? as usize;
        let start = if i == 0 { 0 } else { self.ends[i - 1] as usize };
        Some(&self.bytes[start..end])
    }

    /// The parts in order.
    pub fn iter(&self) -> impl ExactSizeIterator<Item = &[u8]> + Clone + '_ {
        (0..self.len()).map(|i| self.get(i).expect("index below len"))
    }

    /// One `Vec` per part. This costs a `Vec` header (24 bytes) per part:
    /// check [`Parts::len`] against what is expected first.
    pub fn to_vecs(&self) -> Vec<Vec<u8>> {
        self.iter().map(<[u8]>::to_vec).collect()
    }
}

impl std::fmt::Debug for Parts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

struct Reader<'a> {
    b: &'a [u8],
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize, what: &'static str) -> Result<&'a [u8], Error> {
        if self.b.len() < n {
            return Err(Error::Malformed(what));
        }
        let (head, tail) = self.b.split_at(n);
        self.b = tail;
        Ok(head)
    }
    fn u8(&mut self, what: &'static str) -> Result<u8, Error> {
        Ok(self.take(1, what)?[0])
    }
    fn u32(&mut self, what: &'static str) -> Result<u32, Error> {
        Ok(u32::from_be_bytes(self.array(what)?))
    }
    fn array<const N: usize>(&mut self, what: &'static str) -> Result<[u8; N], Error> {
        Ok(self.take(N, what)?.try_into().expect("take returned N bytes"))
    }
    fn rest(&mut self) -> &'a [u8] {
        std::mem::take(&mut self.b)
    }
}

/// Incremental frame decoder: feed it bytes as they arrive, take messages out.
///
/// After an error the decoder stays failed: the stream cannot be resynchronised.
#[derive(Debug)]
pub struct Decoder {
    buf: Vec<u8>,
    cap: u32,
    failed: bool,
}

impl Decoder {
    /// A decoder refusing payloads longer than `cap` bytes.
    pub fn new(cap: u32) -> Decoder {
        Decoder { buf: Vec::new(), cap, failed: false }
    }

    /// Changes the largest payload accepted from here on (for example once
    /// a peer has authenticated).
    pub fn set_cap(&mut self, cap: u32) {
        self.cap = cap;
    }

    /// Appends received bytes.
    pub fn feed(&mut self, data: &[u8]) {
        self.buf.extend_from_slice(data);
    }

    /// Bytes held that do not yet form a whole frame.
    pub fn buffered(&self) -> usize {
        self.buf.len()
    }

    /// The next whole message, `Ok(None)` if more bytes are needed.
    pub fn next_msg(&mut self) -> Result<Option<Msg>, Error> {
        if self.failed {
            return Err(Error::Malformed("stream already failed to decode"));
        }
        let r = self.next_inner();
        if r.is_err() {
            self.failed = true;
            self.buf = Vec::new();
        }
        r
    }

    fn next_inner(&mut self) -> Result<Option<Msg>, Error> {
        // Check what is there as early as possible: garbage fails on its first bytes.
        let have = self.buf.len().min(4);
        if self.buf[..have] != MAGIC[..have] {
            return Err(Error::BadMagic);
        }
        if self.buf.len() < HEADER_LEN {
            return Ok(None);
        }
        let version = self.buf[4];
        let kind = self.buf[5];
        let len = u32::from_be_bytes(self.buf[8..12].try_into().expect("4 bytes"));
        if self.buf[6..8] != [0, 0] {
            return Err(Error::Malformed("reserved header bytes are not zero"));
        }
        let kind = Kind::from_u8(kind).ok_or(Error::Malformed("unknown frame kind"))?;
        // The version first: a newer peer's frames may be larger than ours.
        if version != VERSION && kind != Kind::Reject {
            return Err(Error::VersionMismatch { ours: VERSION, theirs: version });
        }
        if len > self.cap {
            return Err(Error::FrameTooLarge { len, cap: self.cap });
        }
        let total = HEADER_LEN + len as usize;
        if self.buf.len() < total {
            return Ok(None);
        }
        let msg = Msg::parse(kind, &self.buf[HEADER_LEN..total])?;
        self.buf.drain(..total);
        Ok(Some(msg))
    }
}

/// Decodes every frame in `data` with a fresh decoder (for fuzzing and tests):
/// the messages, then the error that stopped decoding, if any.
pub fn decode_all(data: &[u8], cap: u32) -> (Vec<Msg>, Option<Error>) {
    let mut d = Decoder::new(cap);
    d.feed(data);
    let mut out = Vec::new();
    loop {
        match d.next_msg() {
            Ok(Some(m)) => out.push(m),
            Ok(None) => return (out, None),
            Err(e) => return (out, Some(e)),
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn regression_ctrl_oversize_frame_before_admission_does_not_only_advise_raising_max_frame() {
        // A stranger's 4 GiB header before its hello meets the hello-sized
        // cap, not max_frame: raising max_frame would not change it.
        let mut d = Decoder::new(crate::ctrl::proto::Params::PRE_HELLO_FRAME);
        let mut f = Msg::Contribute { round: 0, data: vec![] }.encode();
        f[8..12].copy_from_slice(&u32::MAX.to_be_bytes());
        d.feed(&f);
        let e = d.next_msg().unwrap_err().to_string();
        assert!(e.contains("4294967295 bytes exceeds the 56-byte limit"), "names the length and the cap: {e}");
        assert!(e.contains("before that, the handshake's own frame size"), "says which limit applies when: {e}");
        assert!(!e.contains("exceeds max_frame"), "the cap here is not max_frame: {e}");
    }

    use super::*;

    fn samples() -> Vec<Msg> {
        vec![
            Msg::Challenge { nonce: [7; NONCE_LEN], auth: true },
            Msg::Hello { rank: 3, size: 9, nonce: [1; NONCE_LEN], mac: [2; MAC_LEN] },
            Msg::Welcome { mac: [9; MAC_LEN] },
            Msg::Contribute { round: 5, data: b"endpoint".to_vec() },
            Msg::Contribute { round: 6, data: vec![] },
            Msg::Gathered { round: 5, parts: Parts::from_slices(&[&b"a"[..], b"", b"ccc"]) },
            Msg::Reject { code: RejectCode::Auth, detail: 0, reason: "wrong secret".into() },
        ]
    }

    #[test]
    fn round_trip_byte_by_byte() {
        let stream: Vec<u8> = samples().iter().flat_map(Msg::encode).collect();
        let mut d = Decoder::new(1 << 20);
        let mut got = Vec::new();
        for b in &stream {
            d.feed(std::slice::from_ref(b));
            while let Some(m) = d.next_msg().unwrap() {
                got.push(m);
            }
        }
        assert_eq!(got, samples());
        assert_eq!(d.buffered(), 0);
    }

    #[test]
    fn handshake_max_is_the_longest_reject() {
        let r = Msg::Reject { code: RejectCode::Auth, detail: 0, reason: "x".repeat(2 * MAX_REASON) }.encode();
        assert_eq!(r.len(), HEADER_LEN + HANDSHAKE_MAX);
        let c = Msg::Challenge { nonce: [0; NONCE_LEN], auth: true }.encode();
        let w = Msg::Welcome { mac: [0; MAC_LEN] }.encode();
        assert!(c.len().max(w.len()) <= HEADER_LEN + HANDSHAKE_MAX);
    }

    #[test]
    fn oversize_is_refused_from_the_header() {
        let f = Msg::Contribute { round: 0, data: vec![0; 100] }.encode();
        let mut d = Decoder::new(64);
        d.feed(&f[..HEADER_LEN]);
        assert!(matches!(d.next_msg(), Err(Error::FrameTooLarge { len: 104, cap: 64 })));
        // Stays failed.
        assert!(d.next_msg().is_err());
    }

    #[test]
    fn garbage_fails_on_the_first_byte() {
        let mut d = Decoder::new(64);
        d.feed(b"G");
        assert!(matches!(d.next_msg(), Err(Error::BadMagic)));
        let (msgs, err) = decode_all(b"GET / HTTP/1.1\r\n\r\n", 1024);
        assert!(msgs.is_empty() && matches!(err, Some(Error::BadMagic)));
    }

    #[test]
    fn other_versions_are_named_but_rejects_still_read() {
        let mut f = Msg::Welcome { mac: [0; MAC_LEN] }.encode();
        f[4] = 9;
        assert!(matches!(decode_all(&f, 1024).1, Some(Error::VersionMismatch { ours: VERSION, theirs: 9 })));
        let mut r = Msg::Reject { code: RejectCode::Version, detail: 9, reason: "v9 only".into() }.encode();
        r[4] = 9;
        let (msgs, err) = decode_all(&r, 1024);
        assert!(err.is_none());
        assert!(matches!(&msgs[0], Msg::Reject { code: RejectCode::Version, detail: 9, .. }));
    }

    #[test]
    fn truncated_and_padded_payloads_are_malformed() {
        let f = Msg::Hello { rank: 1, size: 2, nonce: [0; NONCE_LEN], mac: [0; MAC_LEN] }.encode();
        let mut short = f.clone();
        short.truncate(f.len() - 1);
        let len = (short.len() - HEADER_LEN) as u32;
        short[8..12].copy_from_slice(&len.to_be_bytes());
        assert!(matches!(decode_all(&short, 1024).1, Some(Error::Malformed(_))));
        let mut long = f.clone();
        long.push(0);
        let len = (long.len() - HEADER_LEN) as u32;
        long[8..12].copy_from_slice(&len.to_be_bytes());
        assert!(matches!(decode_all(&long, 1024).1, Some(Error::Malformed(_))));
    }

    #[test]
    fn invalid_utf8_reasons_stay_within_the_bound() {
        let mut f = Msg::Reject { code: RejectCode::Protocol, detail: 0, reason: String::new() }.encode();
        f.extend(std::iter::repeat_n(0xff, MAX_REASON));
        let len = (f.len() - HEADER_LEN) as u32;
        f[8..12].copy_from_slice(&len.to_be_bytes());
        let (msgs, err) = decode_all(&f, 4096);
        assert!(err.is_none());
        let Msg::Reject { reason, .. } = &msgs[0] else { panic!("not a reject") };
        assert!(reason.len() <= MAX_REASON && reason.chars().all(|c| c == '\u{fffd}'));
    }

    #[test]
    fn reserved_bytes_must_be_zero() {
        let mut f = Msg::Welcome { mac: [0; MAC_LEN] }.encode();
        f[7] = 1;
        assert!(matches!(decode_all(&f, 1024).1, Some(Error::Malformed(m)) if m.contains("reserved")));
    }

    #[test]
    fn a_huge_part_count_does_not_allocate() {
        let mut p = Vec::new();
        p.extend_from_slice(&0u32.to_be_bytes());
        p.extend_from_slice(&u32::MAX.to_be_bytes());
        let mut f = MAGIC.to_vec();
        f.extend_from_slice(&[VERSION, Kind::Gathered as u8, 0, 0]);
        f.extend_from_slice(&(p.len() as u32).to_be_bytes());
        f.extend_from_slice(&p);
        assert!(matches!(decode_all(&f, 1024).1, Some(Error::Malformed(_))));
    }

    #[test]
    fn reject_reasons_are_cut_on_a_char_boundary() {
        let long = "é".repeat(MAX_REASON);
        let f = Msg::Reject { code: RejectCode::Protocol, detail: 1, reason: long }.encode();
        let (msgs, err) = decode_all(&f, 4096);
        assert!(err.is_none());
        let Msg::Reject { reason, .. } = &msgs[0] else { panic!("not a reject") };
        assert!(reason.len() <= MAX_REASON && reason.chars().all(|c| c == 'é'));
    }
}
