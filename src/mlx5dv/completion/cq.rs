//! Direct CQ polling: the CQE ring, owner-bit validity, the consumer record, arming.

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::mlx5dv::completion::cqe::{cqe_opcode, format, Completion, Cqe64, CqeOpcode, Tail};
use crate::mlx5dv::completion::mini::{self, CqeFormat, CqeResFormat};
use crate::mlx5dv::queue::be::{Be16, Be32};
use crate::mlx5dv::queue::mmio::Mmio;

/// `MLX5_CQ_DOORBELL`: offset of the CQ doorbell in the UAR page.
pub const CQ_DOORBELL: usize = 0x20;
/// `MLX5_CQ_DB_REQ_NOT`: arm for any completion.
pub const DB_REQ_NOT: u32 = 0;
/// `MLX5_CQ_DB_REQ_NOT_SOL`: arm for solicited completions.
pub const DB_REQ_NOT_SOL: u32 = 1 << 24;

/// A completion queue owned by this process: CQE buffer, doorbell records
/// (`[0]` consumer index, `[1]` arm) and UAR, from [`crate::mlx5dv::queue::obj::cq_ring`]
/// or, for tests, from raw parts.
pub struct CqRing {
    /// The 64-byte CQE of entry 0 (the entry's second half in a ring of
    /// 128-byte entries).
    buf: *const u8,
    cqe_cnt: u32,
    cqe_size: u32,
    /// `log2(cqe_size)`.
    shift: u32,
    dbrec: *mut Be32,
    uar: *mut u8,
    cqn: u32,
    /// Consumer index (free-running).
    ci: u32,
    /// Arm sequence number.
    arm_sn: u32,
    /// This ring's process-unique number (never 0), stamped on its completions.
    uid: u64,
    /// CQEs taken by this ring (free-running from 0): the position stamped
    /// on the next completion.
    polled: u64,
    /// Whether compressed sessions are expanded ([`CqRing::set_compression`]).
    expand: bool,
    /// What the mini-CQEs of a receive session carry: the CQ's mini-CQE
    /// format ([`CqRing::set_compression`]).
    rx_kind: ZipKind,
    /// What [`CqRing::poll`] calls on a title: [`CqRing::poll_zip`] for the
    /// receive kind and the CQE size ([`CqRing::set_compression`]).
    zip_poll: ZipPoll,
    /// The session being expanded: CQEs left, the next one's index in it,
    /// what its mini-CQEs hold, the CQE its mini-CQEs are expanded into
    /// (the title with format bits and owner 0, and, past the first CQE,
    /// the fields that are not in the session cleared) and the mini-CQE
    /// array in use.
    zip_left: u32,
    zip_next: u32,
    zip_kind: ZipKind,
    zip_base: [u64; 8],
    zip_counter: u16,
    zip_array: [u64; 8],
}

/// [`CqRing::poll`] into `out` (not empty) at a title (`cqe`, at the
/// consumer index): returns the completions taken.
type ZipPoll = fn(&mut CqRing, &mut [Completion], *const Cqe64) -> usize;

/// What the mini-CQEs of the session under expansion carry besides the
/// byte count (the format, or a requester session's `s_wqe_info`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
enum ZipKind {
    /// `s_wqe_info`: WQE counter and WQE opcode.
    Requester,
    /// The RSS hash result.
    Hash,
    /// The checksum.
    Csum,
    /// The checksum and the stride index (the WQE counter).
    CsumStridx,
    /// Nothing else (no format given).
    Plain,
}

/// The next ring number; 0 is never handed out (it marks "not polled").
static NEXT_UID: AtomicU64 = AtomicU64::new(1);

// SAFETY: plain memory and registers of one CQ; `&mut self` serialises access.
unsafe impl Send for CqRing {}

impl fmt::Debug for CqRing {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CqRing")
            .field("cqn", &self.cqn)
            .field("cqe_cnt", &self.cqe_cnt)
            .field("ci", &self.ci)
            .field("uid", &self.uid)
            .finish()
    }
}

impl CqRing {
    /// A ring over raw parts.
    ///
    /// # Safety
    /// `buf` must be `cqe_cnt * cqe_size` readable bytes written by the
    /// device (or a test's producer), aligned to 8 (CQEs hold 8-byte
    /// fields); `dbrec` two writable records aligned to 4; `uar` a mapped UAR
    /// page (any writable 0x28 bytes for tests) aligned to 8; all alive while
    /// the ring lives, and nothing else may consume this CQ.
    ///
    /// # Panics
    /// If `cqe_cnt` is not a power of two, `cqe_size` is not 64 or 128, or a
    /// pointer is misaligned (programming errors).
    pub unsafe fn from_raw(
        buf: *const u8,
        cqe_cnt: u32,
        cqe_size: u32,
        dbrec: *mut Be32,
        uar: *mut u8,
        cqn: u32,
    ) -> CqRing {
        assert!(cqe_cnt.is_power_of_two(), "CQ size {cqe_cnt} is not a power of two");
        assert!(cqe_size == 64 || cqe_size == 128, "CQE size {cqe_size} is neither 64 nor 128");
        assert!(buf as usize % 8 == 0, "CQ buffer {buf:p} is not 8-byte aligned");
        assert!(dbrec as usize % 4 == 0, "CQ doorbell records {dbrec:p} are not 4-byte aligned");
        assert!(uar as usize % 8 == 0, "UAR {uar:p} is not 8-byte aligned");
        let uid = NEXT_UID.fetch_add(1, Ordering::Relaxed);
        CqRing {
            // The CQE is the second half of a 128-byte entry.
            buf: buf.wrapping_add(cqe_size as usize - 64),
            cqe_cnt,
            cqe_size,
            shift: cqe_size.trailing_zeros(),
            dbrec,
            uar,
            cqn,
            ci: 0,
            arm_sn: 0,
            uid,
            polled: 0,
            expand: false,
            rx_kind: ZipKind::Plain,
            zip_poll: CqRing::poll_title,
            zip_left: 0,
            zip_next: 0,
            zip_kind: ZipKind::Plain,
            zip_base: [0; 8],
            zip_counter: 0,
            zip_array: [0; 8],
        }
    }

    /// Starts the consumer index at `ci` (a CQ that was polled before the view).
    // Used by the `obj` views, which MLNX_OFED 4.x builds leave out.
    #[cfg_attr(rrddmma_mlnx_ofed4, allow(dead_code))]
    pub(crate) fn start_at(&mut self, ci: u32) {
        self.ci = ci;
    }

    /// Expands compressed sessions (title CQE and mini-CQE arrays, [`mini`])
    /// into the CQEs they stand for, whose format-specific field is read as
    /// `format` says (`None`: byte count and WQE counter only). Each
    /// expanded CQE takes one entry of the ring, as the device counts them.
    /// The ring marks the entries of a session invalid (`op_own` = INVALID
    /// with the lap's owner bit) as it takes them, before the consumer record
    /// hands them back: the device writes only the title and the arrays, and
    /// an entry left as the previous lap wrote it would read as valid one lap
    /// later. Without this call a title is decoded as an ordinary CQE.
    ///
    /// # Safety
    /// The buffer given to [`CqRing::from_raw`] must be writable (derived
    /// from a pointer that allows writes), and nothing but the device may
    /// write it while the ring lives.
    pub unsafe fn set_compression(&mut self, format: Option<CqeResFormat>) {
        self.expand = true;
        self.rx_kind = match format {
            Some(CqeResFormat::Hash) => ZipKind::Hash,
            Some(CqeResFormat::Csum) => ZipKind::Csum,
            Some(CqeResFormat::CsumStridx) => ZipKind::CsumStridx,
            None => ZipKind::Plain,
        };
        self.zip_poll = match (self.rx_kind, self.cqe_size == 64) {
            (ZipKind::Hash, true) => CqRing::poll_zip::<{ ZipKind::Hash as u8 }, 64>,
            (ZipKind::Csum, true) => CqRing::poll_zip::<{ ZipKind::Csum as u8 }, 64>,
            (ZipKind::CsumStridx, true) => CqRing::poll_zip::<{ ZipKind::CsumStridx as u8 }, 64>,
            (ZipKind::Plain, true) => CqRing::poll_zip::<{ ZipKind::Plain as u8 }, 64>,
            (ZipKind::Hash, false) => CqRing::poll_zip::<{ ZipKind::Hash as u8 }, 128>,
            (ZipKind::Csum, false) => CqRing::poll_zip::<{ ZipKind::Csum as u8 }, 128>,
            (ZipKind::CsumStridx, false) => CqRing::poll_zip::<{ ZipKind::CsumStridx as u8 }, 128>,
            (ZipKind::Plain, false) => CqRing::poll_zip::<{ ZipKind::Plain as u8 }, 128>,
            // Not a receive kind.
            (ZipKind::Requester, _) => CqRing::poll_title,
        };
    }

    /// The CQ number.
    pub fn cqn(&self) -> u32 {
        self.cqn
    }

    /// The consumer index (free-running).
    pub fn consumer_index(&self) -> u32 {
        self.ci
    }

    /// This ring's process-unique number, stamped on the completions it polls.
    pub(crate) fn uid(&self) -> u64 {
        self.uid
    }

    /// The position (in this ring's count of polled CQEs) that the first CQE
    /// the device has not written yet will have: every CQE already in the
    /// ring, polled or not, is below it. Reads the owner bits of the entries
    /// ahead of the consumer index, at most one lap.
    pub fn horizon(&self) -> u64 {
        // The rest of a session under expansion is in the ring.
        let mut n = self.zip_left;
        while n < self.cqe_cnt {
            let ci = self.ci.wrapping_add(n);
            let cqe = self.cqe(ci);
            // SAFETY: the entry is inside the buffer; `op_own` is read
            // volatile because the device writes it.
            let op_own = unsafe { std::ptr::read_volatile(std::ptr::addr_of!((*cqe).op_own)) };
            if !Cqe64::is_valid_for(op_own, ci, self.cqe_cnt) {
                break;
            }
            n += if self.expand && format(op_own) == CqeFormat::COMPRESSED.to_raw() {
                std::sync::atomic::fence(Ordering::Acquire);
                // SAFETY: a title the device handed over; its byte count is
                // the number of CQEs of the session.
                let count = unsafe { std::ptr::read_volatile(std::ptr::addr_of!((*cqe).byte_cnt)) }.get();
                count.clamp(1, self.cqe_cnt)
            } else {
                1
            };
        }
        self.polled + u64::from(n.min(self.cqe_cnt))
    }

    /// The 64-byte CQE at consumer index `ci` (the second half of a 128-byte entry).
    #[inline(always)]
    fn cqe(&self, ci: u32) -> *const Cqe64 {
        let idx = (ci & (self.cqe_cnt - 1)) as usize;
        // `buf` is offset to the entry's CQE; `idx << shift` is below
        // `cqe_cnt * cqe_size`, so the entry is inside the buffer.
        self.buf.wrapping_add(idx << self.shift).cast()
    }

    /// Polls up to `out.len()` completions into `out` (their fields are
    /// decoded when read: [`Completion`]); then updates the consumer record
    /// (`dbrec[0] = ci & 0xffffff`) if any were taken. No allocation, no
    /// system call.
    #[inline]
    pub fn poll(&mut self, out: &mut [Completion]) -> usize {
        let mut n = 0;
        while n < out.len() {
            if self.zip_left > 0 {
                return self.poll_sessions(out, n);
            }
            let ci = self.ci;
            let Some((cqe, op_own)) = self.written_at(ci) else { break };
            if is_title(op_own) && self.expand {
                return n + (self.zip_poll)(self, &mut out[n..], cqe);
            }
            // Written before the ring's indices move: nothing stands
            // between the entry's loads and the stores into `out`.
            out[n] = Completion::from_tail(read_tail(cqe), self.uid, self.polled, false);
            self.polled += 1;
            self.ci = ci.wrapping_add(1);
            n += 1;
        }
        if n > 0 {
            self.publish();
        }
        n
    }

    /// [`CqRing::poll`] from `out[n]` on, once a compressed session is met
    /// (its title or the rest of one under expansion).
    #[inline(never)]
    fn poll_sessions(&mut self, out: &mut [Completion], mut n: usize) -> usize {
        while n < out.len() {
            if self.zip_left > 0 {
                n += self.expand_run(&mut out[n..]);
                continue;
            }
            let Some((cqe, op_own)) = self.next_written() else { break };
            if is_title(op_own) && self.expand {
                n = self.take_title(out, n, cqe);
                continue;
            }
            out[n] = Completion::from_tail(read_tail(cqe), self.uid, self.polled, false);
            self.advance();
            n += 1;
        }
        if n > 0 {
            self.publish();
        }
        n
    }

    /// [`CqRing::poll`] into `out` (not empty), once the title of a
    /// compressed session is met at `cqe` (at the consumer index), for any
    /// ring, any session; returns the completions taken.
    #[inline(never)]
    fn poll_title(&mut self, out: &mut [Completion], cqe: *const Cqe64) -> usize {
        let n = self.take_title(out, 0, cqe);
        if n < out.len() {
            return self.poll_sessions(out, n);
        }
        // `n` is `out.len()`, not 0: CQEs were taken.
        self.publish();
        n
    }

    /// [`CqRing::poll_title`] for a ring of `STRIDE`-byte entries whose
    /// receive sessions' mini-CQEs carry what `K` (a [`ZipKind`]) says, as
    /// [`CqRing::set_compression`] picks it for [`CqRing::poll`]: a session
    /// that can be taken whole ([`CqRing::whole`]) is expanded here (a
    /// requester session by the requester kind's copy), any other is started
    /// by [`CqRing::poll_title`].
    #[inline(never)]
    fn poll_zip<const K: u8, const STRIDE: usize>(&mut self, out: &mut [Completion], cqe: *const Cqe64) -> usize {
        // SAFETY: the title the device handed over (`written_at`); `Cqe64`
        // is 64 bytes of plain integers aligned to 8, word 7 its last 8.
        let (raw, last) = unsafe {
            (std::ptr::read(std::ptr::addr_of!((*cqe).byte_cnt)).get(), std::ptr::read(cqe.cast::<u64>().add(7)))
        };
        if K != ZipKind::Requester as u8 && is_requester(last) {
            return self.poll_zip::<{ ZipKind::Requester as u8 }, STRIDE>(out, cqe);
        }
        let Some(dst) = self.whole(raw, out) else {
            return self.poll_title(out, cqe);
        };
        let n = dst.len();
        self.expand_session::<K, STRIDE>(cqe, dst);
        if n < out.len() {
            return self.poll_sessions(out, n);
        }
        self.publish();
        n
    }

    /// The first completions of `rest`, one per CQE of the session whose
    /// title (at the consumer index) has the byte count `raw` (the
    /// device's count cut to 1..=ring size), if the session can be taken
    /// whole: it fits in `rest`, and its entries (two at least: array 0 is
    /// in the entry after the title's) end before the ring's end.
    #[inline(always)]
    fn whole<'a>(&self, raw: u32, rest: &'a mut [Completion]) -> Option<&'a mut [Completion]> {
        let count = raw.min(self.cqe_cnt).max(1);
        let at = self.ci & (self.cqe_cnt - 1);
        // `at < cqe_cnt <= 2^31` and `count.max(2) <= cqe_cnt.max(2)`: no overflow.
        if at + count.max(2) > self.cqe_cnt {
            return None;
        }
        rest.get_mut(..count as usize)
    }

    /// Takes the session whose title is the CQE at `cqe` (at the consumer
    /// index, `n < out.len()`): expanded into `out[n..]` when it can be
    /// taken whole ([`CqRing::whole`]), else started for
    /// [`CqRing::expand_run`] to take in parts. Returns the new `n`.
    #[inline(always)]
    fn take_title(&mut self, out: &mut [Completion], n: usize, cqe: *const Cqe64) -> usize {
        // SAFETY: the title the device handed over (`next_written`);
        // its byte count is the number of CQEs of the session.
        let raw = unsafe { std::ptr::read(std::ptr::addr_of!((*cqe).byte_cnt)) }.get();
        match self.whole(raw, &mut out[n..]) {
            // Expanded straight from the ring, no state kept between calls.
            Some(dst) => {
                let count = dst.len();
                self.expand_whole(cqe, dst);
                n + count
            }
            // Split across calls (or across the ring's end): the
            // session's state is kept.
            None => {
                self.start_session(cqe);
                n
            }
        }
    }

    /// Expands the whole session whose title is the CQE at `cqe` (at the
    /// consumer index) into `out` ([`CqRing::expand_session`] for the
    /// session's kind and the ring's CQE size).
    #[inline(always)]
    fn expand_whole(&mut self, cqe: *const Cqe64, out: &mut [Completion]) {
        // SAFETY: the title the device handed over (`next_written`), its
        // last word inside it.
        let last = unsafe { std::ptr::read(cqe.cast::<u64>().add(7)) };
        // One loop per kind and CQE size (the stride a constant of the loop).
        match (if is_requester(last) { ZipKind::Requester } else { self.rx_kind }, self.cqe_size == 64) {
            (ZipKind::Requester, true) => self.expand_session::<{ ZipKind::Requester as u8 }, 64>(cqe, out),
            (ZipKind::Hash, true) => self.expand_session::<{ ZipKind::Hash as u8 }, 64>(cqe, out),
            (ZipKind::Csum, true) => self.expand_session::<{ ZipKind::Csum as u8 }, 64>(cqe, out),
            (ZipKind::CsumStridx, true) => self.expand_session::<{ ZipKind::CsumStridx as u8 }, 64>(cqe, out),
            (ZipKind::Plain, true) => self.expand_session::<{ ZipKind::Plain as u8 }, 64>(cqe, out),
            (ZipKind::Requester, false) => self.expand_session::<{ ZipKind::Requester as u8 }, 128>(cqe, out),
            (ZipKind::Hash, false) => self.expand_session::<{ ZipKind::Hash as u8 }, 128>(cqe, out),
            (ZipKind::Csum, false) => self.expand_session::<{ ZipKind::Csum as u8 }, 128>(cqe, out),
            (ZipKind::CsumStridx, false) => self.expand_session::<{ ZipKind::CsumStridx as u8 }, 128>(cqe, out),
            (ZipKind::Plain, false) => self.expand_session::<{ ZipKind::Plain as u8 }, 128>(cqe, out),
        }
    }

    /// Expands the whole session whose title is the CQE at `cqe` (at the
    /// consumer index; its mini-CQEs carry what `K`, a [`ZipKind`], says)
    /// into `out`, one completion per CQE of the session (`out.len()` is
    /// its count, cut to the ring), in a ring of `STRIDE`-byte entries, as
    /// [`CqRing::expand`] does for a session kept across calls: each CQE is
    /// what [`mini::expand`] makes of the title and its mini-CQE, and each
    /// entry is marked invalid for the next lap. The session's entries
    /// (two at least) must end before the ring's end
    /// ([`CqRing::whole`]). Advances the consumer index and the
    /// position; the consumer record is left to the caller.
    #[inline(always)]
    fn expand_session<const K: u8, const STRIDE: usize>(&mut self, cqe: *const Cqe64, out: &mut [Completion]) {
        let ci0 = self.ci;
        let owner = u8::from(ci0 & self.cqe_cnt != 0);
        // SAFETY: the title the device handed over (`next_written`);
        // `Cqe64` is 64 bytes of plain integers, aligned to 8.
        let t = unsafe { std::ptr::read(cqe.cast::<[u64; 8]>()) };
        // Receive sessions whose mini-CQEs carry no hash: past the first
        // CQE, the hash result and type (bytes 12-16) are 0.
        let clears_hash = K == ZipKind::Csum as u8 || K == ZipKind::CsumStridx as u8 || K == ZipKind::Plain as u8;
        let (w1, w2) = if clears_hash { (t[1] & !bytes(4, 4), t[2] & !bytes(0, 1)) } else { (t[1], t[2]) };
        // Format bits 0 and the entries' owner bit; the WQE counter is
        // written per CQE.
        let w7 = (t[7] & !move_bytes(0x0d, 0, 7)) | move_bytes(u64::from(owner), 0, 7);
        let tail = Tail([w1, w2, t[3], t[4], t[5], t[6], w7]);
        let last = t[7].to_ne_bytes();
        let counter = u16::from_be_bytes([last[4], last[5]]);
        let (seq, uid) = (Completion::tagged_seq(self.polled, true), self.uid);
        let invalid = (CqeOpcode::INVALID.to_raw() << 4) | owner;
        // The entries of the session, consecutive (they end before the
        // ring's end): CQE `j`'s at `first + j * STRIDE`.
        let first = cqe.cast_mut().cast::<u8>();
        // CQE `j`'s WQE counter, the title's plus `j`, is its position's
        // low bits plus `delta`.
        let delta = counter.wrapping_sub(seq as u16);
        self.ci = ci0.wrapping_add(out.len() as u32);
        self.polled += out.len() as u64;
        // Last to first, an array at a time: an array's entry is marked
        // after every mini-CQE of it is read (marking overwrites the last
        // byte of its last mini-CQE).
        let mut end = out.len();
        while end > 0 {
            // CQEs `g..end`, whose mini-CQEs are array `g / 8`: in the entry
            // after the title's, then in CQE `g`'s. CQE `j`'s mini-CQE
            // (`j - g` of the array) is at `arr + 8 * j`.
            let g = (end - 1) & !(mini::PER_ARRAY as usize - 1);
            let arr = first.wrapping_add(STRIDE * g.max(1)).wrapping_sub(8 * g);
            let mut j = end;
            loop {
                j -= 1;
                let s = seq + j as u64;
                // SAFETY: `g <= j < end <= out.len()`.
                let slot = unsafe { out.get_unchecked_mut(j) };
                *slot = Completion::from_tagged(tail, uid, s);
                let m = arr.wrapping_add(8 * j);
                // Byte `k` of the CQE is byte `k - 8` of the completion's tail.
                let dst = std::ptr::addr_of_mut!(slot.tail).cast::<u8>();
                // SAFETY: `m` is a mini-CQE of the array, 8 bytes inside
                // its entry, inside the buffer (the session ends before the
                // ring's end), written by the device as part of the session
                // whose title it handed over (read after the title's acquire
                // fence, not written by the device until the consumer record
                // passes it); `dst + k` for `k < 56` is inside `slot`'s
                // tail; the two do not overlap.
                unsafe {
                    // The byte count: bytes 44-47.
                    std::ptr::copy_nonoverlapping(m.add(4), dst.add(36), 4);
                    if K == ZipKind::Requester as u8 {
                        // `s_wqe_info`: the WQE counter to 60-61, the WQE opcode to 56.
                        std::ptr::copy_nonoverlapping(m, dst.add(52), 2);
                        std::ptr::copy_nonoverlapping(m.add(2), dst.add(48), 1);
                    } else {
                        if K == ZipKind::Hash as u8 {
                            // The hash result: bytes 12-15.
                            std::ptr::copy_nonoverlapping(m, dst.add(4), 4);
                        } else if K == ZipKind::Csum as u8 || K == ZipKind::CsumStridx as u8 {
                            // The checksum: bytes 20-21.
                            std::ptr::copy_nonoverlapping(m, dst.add(12), 2);
                        }
                        if K == ZipKind::CsumStridx as u8 {
                            // The stride index is the WQE counter.
                            std::ptr::copy_nonoverlapping(m.add(2), dst.add(52), 2);
                        } else {
                            let c = (s as u16).wrapping_add(delta).to_be_bytes();
                            std::ptr::copy_nonoverlapping(c.as_ptr(), dst.add(52), 2);
                        }
                    }
                }
                // SAFETY: `first + j * STRIDE + 63` is the `op_own` byte of
                // CQE `j`'s entry, inside the buffer, which
                // `set_compression`'s contract makes writable; the device
                // does not write it until the consumer record passes it,
                // which the caller writes after this.
                unsafe { std::ptr::write_volatile(first.wrapping_add(j * STRIDE + 63), invalid) };
                if j == g {
                    break;
                }
            }
            end = g;
        }
        if clears_hash {
            if let Some(c) = out.first_mut() {
                // The first CQE keeps the title's hash result and type.
                c.tail.0[0] = t[1];
                c.tail.0[1] = (c.tail.0[1] & !bytes(0, 1)) | (t[2] & bytes(0, 1));
            }
        }
    }

    /// Polls one completion and, when the device scattered its payload into
    /// the CQE (scatter-to-CQE: receives of up to 32 bytes in a 64-byte CQE,
    /// up to 64 bytes in a 128-byte one; [`Completion::inline_scatter`]),
    /// copies that payload into `payload` before the entry is handed back to
    /// the device. Returns the completion and the bytes copied (0 without
    /// scatter): `byte_len`, at most the scatter size (32 or 64).
    ///
    /// A 64-byte-scatter CQE in a ring of 64-byte CQEs (which the device
    /// does not write) copies nothing: its payload would be the previous
    /// entry.
    #[inline]
    pub fn poll_scattered(&mut self, payload: &mut [u8; 64]) -> Option<(Completion, usize)> {
        let (c, cqe) = self.take()?;
        let n = (c.byte_len() as usize).min(usize::from(c.inline_scatter()));
        let src: *const u8 = match c.inline_scatter() {
            // The payload fills the 64-byte CQE from its start.
            32 => cqe.cast(),
            // The first half of a 128-byte entry.
            64 if self.cqe_size == 128 => cqe.cast::<u8>().wrapping_sub(64),
            _ => std::ptr::null(),
        };
        let n = if src.is_null() { 0 } else { n };
        if n > 0 {
            // SAFETY: `src..src + n` lies in the entry the device handed over
            // (n <= 32 inside the 64-byte CQE, n <= 64 in the first half of
            // a 128-byte entry); the consumer record is written only below,
            // so the device does not reuse the entry while it is read.
            unsafe { std::ptr::copy_nonoverlapping(src, payload.as_mut_ptr(), n) };
        }
        self.publish();
        Some((c, n))
    }

    /// Takes the CQE at the consumer index if the device has written it
    /// (a session's next CQE, expanded): the completion and the entry's
    /// address; the consumer record is left for [`CqRing::publish`].
    #[inline]
    fn take(&mut self) -> Option<(Completion, *const Cqe64)> {
        let (raw, expanded, cqe, seq) = self.take_raw()?;
        Some((Completion::from_tail(raw.tail(), self.uid, seq, expanded), cqe))
    }

    /// The entry at the consumer index if the device has written it (owner
    /// bit and opcode), with its `op_own`; what follows reads after an
    /// acquire fence. Nothing is taken.
    #[inline(always)]
    fn next_written(&self) -> Option<(*const Cqe64, u8)> {
        self.written_at(self.ci)
    }

    /// [`CqRing::next_written`] for consumer index `ci`.
    #[inline(always)]
    fn written_at(&self, ci: u32) -> Option<(*const Cqe64, u8)> {
        let cqe = self.cqe(ci);
        // SAFETY: the entry is inside the buffer; `op_own` is read
        // volatile because the device writes it.
        let op_own = unsafe { std::ptr::read_volatile(std::ptr::addr_of!((*cqe).op_own)) };
        if !Cqe64::is_valid_for(op_own, ci, self.cqe_cnt) {
            return None;
        }
        // Read the rest only after seeing ownership (udma_from_device_barrier).
        std::sync::atomic::fence(Ordering::Acquire);
        Some((cqe, op_own))
    }

    /// Moves past the CQE taken: the consumer index and the position.
    #[inline(always)]
    fn advance(&mut self) {
        self.polled += 1;
        self.ci = self.ci.wrapping_add(1);
    }

    /// The CQE at the consumer index if the device has written it (a
    /// compressed session's next CQE, expanded, when sessions are
    /// expanded), whether it was expanded from a mini-CQE, the entry's
    /// address and its position; the consumer index and the position
    /// advance, the consumer record is left for [`CqRing::publish`].
    #[inline(always)]
    fn take_raw(&mut self) -> Option<(Cqe64, bool, *const Cqe64, u64)> {
        let seq = self.polled;
        if self.zip_left == 0 {
            let (cqe, op_own) = self.next_written()?;
            if !(is_title(op_own) && self.expand) {
                // SAFETY: the device handed this entry over (`next_written`)
                // and does not write it until the consumer record passes it
                // (`publish`, after a release fence).
                let raw = unsafe { std::ptr::read(cqe) };
                self.advance();
                return Some((raw, false, cqe, seq));
            }
            self.start_session(cqe);
        }
        let cqe = self.cqe(self.ci);
        let w = self.take_mini();
        // SAFETY: `Cqe64` is 64 bytes of plain integers, any eight words are one.
        Some((unsafe { std::mem::transmute::<[u64; 8], Cqe64>(w) }, true, cqe, seq))
    }

    /// Starts expanding the session whose title is the CQE at `cqe` (at the
    /// consumer index); its CQEs are taken by [`CqRing::expand`].
    #[cold]
    #[inline(never)]
    fn start_session(&mut self, cqe: *const Cqe64) {
        // SAFETY: the title the device handed over (`next_written`).
        let title = unsafe { std::ptr::read(cqe) };
        // The device's count; a count past the ring is cut to the ring.
        self.zip_left = title.byte_cnt.get().clamp(1, self.cqe_cnt);
        self.zip_next = 0;
        self.zip_kind = if mini::is_requester(&title) { ZipKind::Requester } else { self.rx_kind };
        // Format bits, owner and (taken from each mini-CQE or counted from
        // the title's) WQE counter 0.
        let base = Cqe64 { op_own: title.op_own & 0xf2, wqe_counter: Be16::new(0), ..title };
        self.zip_counter = title.wqe_counter.get();
        // SAFETY: `Cqe64` is 64 bytes of plain integers, aligned to 8.
        self.zip_base = unsafe { std::mem::transmute::<Cqe64, [u64; 8]>(base) };
    }

    /// Expands as many CQEs of the session under expansion as are left and
    /// fit into `out`, stamped; returns how many.
    #[inline(always)]
    fn expand_run(&mut self, out: &mut [Completion]) -> usize {
        let uid = self.uid;
        let k = out.len().min(self.zip_left as usize);
        let sink = |j: usize, w: [u64; 8], seq: u64| {
            out[j] = Completion::from_tail(Tail([w[1], w[2], w[3], w[4], w[5], w[6], w[7]]), uid, seq, true);
        };
        match self.zip_kind {
            ZipKind::Requester => self.expand::<{ ZipKind::Requester as u8 }>(k, sink),
            ZipKind::Hash => self.expand::<{ ZipKind::Hash as u8 }>(k, sink),
            ZipKind::Csum => self.expand::<{ ZipKind::Csum as u8 }>(k, sink),
            ZipKind::CsumStridx => self.expand::<{ ZipKind::CsumStridx as u8 }>(k, sink),
            ZipKind::Plain => self.expand::<{ ZipKind::Plain as u8 }>(k, sink),
        }
        k
    }

    /// The next CQE of the session under expansion, as eight words (the
    /// consumer index and the position are advanced).
    fn take_mini(&mut self) -> [u64; 8] {
        let mut out = [0u64; 8];
        let sink = |_: usize, w: [u64; 8], _: u64| out = w;
        match self.zip_kind {
            ZipKind::Requester => self.expand::<{ ZipKind::Requester as u8 }>(1, sink),
            ZipKind::Hash => self.expand::<{ ZipKind::Hash as u8 }>(1, sink),
            ZipKind::Csum => self.expand::<{ ZipKind::Csum as u8 }>(1, sink),
            ZipKind::CsumStridx => self.expand::<{ ZipKind::CsumStridx as u8 }>(1, sink),
            ZipKind::Plain => self.expand::<{ ZipKind::Plain as u8 }>(1, sink),
        }
        out
    }

    /// Takes the next `k` CQEs (at most `zip_left`) of the session under
    /// expansion, whose mini-CQEs carry what `K` (a [`ZipKind`]) says:
    /// for each, reads the mini-CQE array it needs, expands the CQE (what
    /// [`mini::expand`] makes: the session's prepared CQE with the fields of
    /// the mini-CQE put in, word by word), hands it to `sink` (its index
    /// among the `k`, its words, its position), and marks its entry invalid
    /// for the next lap. Advances the consumer index and the position.
    #[inline(always)]
    fn expand<const K: u8>(&mut self, k: usize, mut sink: impl FnMut(usize, [u64; 8], u64)) {
        let (buf, mask, shift) = (self.buf, self.cqe_cnt - 1, self.shift);
        let entry = |ci: u32| buf.wrapping_add(((ci & mask) as usize) << shift).cast::<Cqe64>();
        let (mut ci, mut i, mut seq) = (self.ci, self.zip_next, self.polled);
        let (cnt, counter) = (self.cqe_cnt, self.zip_counter);
        let mut base = self.zip_base;
        let mut arr = self.zip_array;
        for j in 0..k {
            let at = i % mini::PER_ARRAY;
            if at == 0 {
                // The session started `i` entries before the consumer index.
                let slot = ci.wrapping_sub(i).wrapping_add(mini::position(i).0);
                // SAFETY: an entry inside the buffer, written by the device
                // as part of the session whose title it handed over; 8
                // mini-CQEs of 8 plain bytes are the entry's 64.
                arr = unsafe { std::ptr::read_volatile(entry(slot).cast::<[u64; 8]>()) };
            }
            let owner = u8::from(ci & cnt != 0);
            sink(j, expand_words::<K>(&base, arr[at as usize], counter.wrapping_add(i as u16), owner), seq);
            // SAFETY: the entry is inside the buffer, which
            // `set_compression`'s contract makes writable; the device does
            // not write it until the consumer record passes it, which
            // happens after this write.
            unsafe {
                std::ptr::write_volatile(
                    std::ptr::addr_of!((*entry(ci)).op_own).cast_mut(),
                    (CqeOpcode::INVALID.to_raw() << 4) | owner,
                )
            };
            if i == 0 && (K == ZipKind::Csum as u8 || K == ZipKind::CsumStridx as u8 || K == ZipKind::Plain as u8) {
                // Past the first CQE of a receive session the hash result
                // and type (bytes 12-16) are not in the session ("no
                // hash"), unless the format carries the hash.
                base[1] &= !bytes(4, 4);
                base[2] &= !bytes(0, 1);
            }
            i += 1;
            ci = ci.wrapping_add(1);
            seq += 1;
        }
        self.ci = ci;
        self.polled = seq;
        self.zip_next = i;
        self.zip_left -= k as u32;
        // Only the hash words change (`i == 0` above), and the array is
        // needed again only when the session goes on inside it.
        self.zip_base[1] = base[1];
        self.zip_base[2] = base[2];
        if i % mini::PER_ARRAY != 0 && self.zip_left > 0 {
            self.zip_array = arr;
        }
    }

    /// Polls up to `out.len()` CQEs as 64-byte entries (compressed sessions
    /// expanded when [`CqRing::set_compression`] was called), for fields
    /// [`Completion`] does not carry (RSS hash, checksum, ...); then
    /// updates the consumer record. CQEs taken here cannot be retired.
    pub fn poll_cqes(&mut self, out: &mut [Cqe64]) -> usize {
        let mut n = 0;
        while n < out.len() {
            let Some((c, ..)) = self.take_raw() else { break };
            out[n] = c;
            n += 1;
        }
        if n > 0 {
            self.publish();
        }
        n
    }

    /// Writes the consumer record: the device may reuse the entries taken.
    #[inline(always)]
    fn publish(&mut self) {
        // The entries' reads stay before the record that hands them back.
        std::sync::atomic::fence(Ordering::Release);
        // SAFETY: `dbrec` is the CQ's consumer record (ring contract).
        unsafe { std::ptr::write_volatile(self.dbrec, Be32::new(self.ci & 0xff_ffff)) };
    }

    /// Arms the CQ for the next (or next solicited) completion, in libmlx5's
    /// order: arm record `sn << 28 | cmd | ci`; `wc_start`; the 64-bit
    /// doorbell `(sn << 28 | cmd | ci) << 32 | cqn` at UAR + 0x20; flush.
    /// Call [`CqRing::event_received`] when the event comes.
    pub fn arm<M: Mmio>(&mut self, mmio: &mut M, solicited: bool) {
        let sn = self.arm_sn & 3;
        let ci = self.ci & 0xff_ffff;
        let cmd = if solicited { DB_REQ_NOT_SOL } else { DB_REQ_NOT };
        let word = (sn << 28) | cmd | ci;
        // SAFETY: `dbrec + 1` is the CQ's arm record (ring contract).
        unsafe { mmio.write_dbrec(self.dbrec.add(1), word) };
        mmio.wc_start();
        let db = (u64::from(word) << 32) | u64::from(self.cqn);
        // SAFETY: the CQ doorbell inside the mapped UAR page (ring contract).
        unsafe { mmio.write64(self.uar, CQ_DOORBELL, db.to_be_bytes()) };
        mmio.flush_writes();
    }

    /// Advances the arm sequence number after a completion event.
    pub fn event_received(&mut self) {
        self.arm_sn = self.arm_sn.wrapping_add(1);
    }

    /// Takes the next CQE (a compressed session's next one, expanded) and
    /// hands it to `f` in place (the ring's entry itself when it is not
    /// part of a session, else the expanded copy) with the position
    /// stamped on it (this ring's count of polled CQEs), for pollers of
    /// other CQE layouts (striding WQs, [`crate::mlx5dv::raw::mprq`]); the
    /// consumer record is left for [`CqRing::publish_taken`].
    #[inline(always)]
    pub(crate) fn take_stamped_with<R>(&mut self, f: impl FnOnce(&Cqe64, u64) -> R) -> Option<R> {
        let seq = self.polled;
        if self.zip_left == 0 {
            let (cqe, op_own) = self.next_written()?;
            if !(is_title(op_own) && self.expand) {
                // SAFETY: the device handed this entry over (`next_written`)
                // and does not write it until the consumer record passes it
                // (`publish`, after a release fence), so it stays as read
                // while `f` borrows it; `Cqe64` is plain integers, aligned.
                let r = f(unsafe { &*cqe }, seq);
                self.advance();
                return Some(r);
            }
            self.start_session(cqe);
        }
        let w = self.take_mini();
        // SAFETY: `Cqe64` is 64 bytes of plain integers, any eight words are one.
        let raw = unsafe { std::mem::transmute::<[u64; 8], Cqe64>(w) };
        Some(f(&raw, seq))
    }

    /// Writes the consumer record after [`CqRing::take_stamped_with`].
    #[inline(always)]
    pub(crate) fn publish_taken(&mut self) {
        self.publish();
    }
}

/// Whether `op_own` is a compressed session's title's.
#[inline(always)]
fn is_title(op_own: u8) -> bool {
    format(op_own) == CqeFormat::COMPRESSED.to_raw()
}

/// Whether a title whose last word (bytes 56-63) is `last` heads a
/// requester session ([`mini::is_requester`]).
#[inline(always)]
fn is_requester(last: u64) -> bool {
    const OPS: u16 = (1 << CqeOpcode::REQ.to_raw()) | (1 << CqeOpcode::REQ_ERR.to_raw());
    (OPS >> cqe_opcode(last.to_ne_bytes()[7])) & 1 != 0
}

/// Bytes 8..64 of the written entry at `cqe`.
#[inline(always)]
fn read_tail(cqe: *const Cqe64) -> Tail {
    // SAFETY: the device handed this entry over (`next_written`) and does
    // not write it until the consumer record passes it (`publish`, after a
    // release fence); `Cqe64` is 64 bytes of plain integers aligned to 8,
    // so bytes 8..64 are seven aligned words.
    Tail(unsafe { std::ptr::read(cqe.cast::<u64>().add(1).cast::<[u64; 7]>()) })
}

/// CQE `i` of a session as eight words: `base` (the title prepared by
/// `start_session`) with the fields of mini-CQE `m` (`info` in bytes 0-3,
/// the byte count in 4-7) that `K` (a [`ZipKind`]) says it carries, the
/// WQE counter `counter` (the title's plus `i`) where the mini-CQE does not
/// carry one, and the entry's owner bit.
#[inline(always)]
fn expand_words<const K: u8>(base: &[u64; 8], m: u64, counter: u16, owner: u8) -> [u64; 8] {
    let mut w = *base;
    // Byte count: bytes 44-47, where the mini-CQE has it (4-7).
    w[5] = (w[5] & !bytes(4, 4)) | (m & bytes(4, 4));
    // Owner: bit 0 of byte 63.
    w[7] |= move_bytes(u64::from(owner), 0, 7);
    let from_title = move_bytes(u64::from(counter.to_be()), 0, 4);
    if K == ZipKind::Requester as u8 {
        // `s_wqe_info`: the WQE counter (bytes 0-1) to 60-61, the WQE
        // opcode (byte 2) to 56.
        w[7] = (w[7] & !bytes(0, 1)) | (move_bytes(m, 0, 4) & bytes(4, 2)) | (move_bytes(m, 2, 0) & bytes(0, 1));
    } else if K == ZipKind::Hash as u8 {
        // The hash result: bytes 12-15.
        w[1] = (w[1] & !bytes(4, 4)) | (move_bytes(m, 0, 4) & bytes(4, 4));
        w[7] |= from_title;
    } else if K == ZipKind::Csum as u8 {
        // The checksum: bytes 20-21.
        w[2] = (w[2] & !bytes(4, 2)) | (move_bytes(m, 0, 4) & bytes(4, 2));
        w[7] |= from_title;
    } else if K == ZipKind::CsumStridx as u8 {
        w[2] = (w[2] & !bytes(4, 2)) | (move_bytes(m, 0, 4) & bytes(4, 2));
        // The stride index (bytes 2-3) is the WQE counter.
        w[7] |= move_bytes(m, 2, 4) & bytes(4, 2);
    } else {
        w[7] |= from_title;
    }
    w
}

/// The mask of bytes `at..at + len` of a word (native byte order).
#[inline(always)]
const fn bytes(at: usize, len: usize) -> u64 {
    let mut b = [0u8; 8];
    let mut k = at;
    while k < at + len {
        b[k] = 0xff;
        k += 1;
    }
    u64::from_ne_bytes(b)
}

/// `x` with its byte `from` moved to byte `to` (native byte order; the
/// bytes shifted out are lost).
#[inline(always)]
const fn move_bytes(x: u64, from: u32, to: u32) -> u64 {
    let up = to >= from;
    let by = 8 * if up { to - from } else { from - to };
    // Byte k is bits 8k.. on a little-endian target, bits 56 - 8k.. on a big-endian one.
    if up == cfg!(target_endian = "little") {
        x << by
    } else {
        x >> by
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A title whose count is 0 or past the ring (a device value) neither
    /// panics nor reads past one lap: the count is cut to 1..=cqe_cnt.
    #[test]
    fn a_title_count_outside_the_ring_is_cut_to_it() {
        for count in [0u32, 1000, u32::MAX] {
            let mut buf = vec![0u64; 8 * 8];
            // Every entry invalid with owner 1 (a fresh CQ)...
            for i in 0..8 {
                buf[i * 8 + 7] = u64::from_ne_bytes([0, 0, 0, 0, 0, 0, 0, 0xf1]);
            }
            // ...but entry 0: a title of `count` CQEs, owner 0 (lap 0).
            let title = Cqe64 {
                byte_cnt: Be32::new(count),
                op_own: (CqeOpcode::RESP_SEND.to_raw() << 4) | (CqeFormat::COMPRESSED.to_raw() << 2),
                ..Cqe64::default()
            };
            // SAFETY: `Cqe64` is 64 plain bytes; entry 0 of `buf`.
            unsafe { std::ptr::write(buf.as_mut_ptr().cast::<Cqe64>(), title) };
            let mut dbrec = [Be32::default(); 2];
            let mut uar = [0u64; 8];
            // SAFETY: test memory of the sizes `from_raw` asks for; `buf`
            // comes from a mutable pointer and only this ring writes it.
            let mut ring = unsafe {
                CqRing::from_raw(
                    buf.as_mut_ptr().cast_const().cast(),
                    8,
                    64,
                    dbrec.as_mut_ptr(),
                    uar.as_mut_ptr().cast(),
                    1,
                )
            };
            // SAFETY: as above.
            unsafe { ring.set_compression(Some(CqeResFormat::Hash)) };
            let want = count.clamp(1, 8) as usize;
            assert_eq!(ring.horizon(), want as u64, "count {count}");
            let mut out = [Cqe64::default(); 16];
            assert_eq!(ring.poll_cqes(&mut out), want, "count {count}");
            assert_eq!(ring.poll_cqes(&mut out), 0, "count {count}: the session's entries are marked invalid");
        }
    }

    /// A session of one CQE (a device count of 0 or 1) whose title is the
    /// ring's last entry is taken by `poll` (through the state-keeping path:
    /// its array is past the ring's end): its mini-CQE array is read from
    /// the ring's first entry (the index wraps), and the one CQE is that
    /// mini-CQE's, its entry marked invalid.
    #[test]
    fn a_one_cqe_session_at_the_rings_end_reads_its_array_at_the_start() {
        use crate::mlx5dv::completion::mini::{expand, MiniCqe};
        for count in [0u32, 1] {
            let mut buf = vec![0u64; 8 * 8];
            for i in 0..8 {
                buf[i * 8 + 7] = u64::from_ne_bytes([0, 0, 0, 0, 0, 0, 0, 0xf1]);
            }
            let title = Cqe64 {
                byte_cnt: Be32::new(count),
                op_own: (CqeOpcode::RESP_SEND.to_raw() << 4) | (CqeFormat::COMPRESSED.to_raw() << 2),
                ..Cqe64::default()
            };
            let m = MiniCqe { info: [1, 2, 3, 4], byte_cnt: Be32::new(77) };
            // SAFETY: `Cqe64` is 64 plain bytes; entry 7 of `buf`; the array
            // in entry 0 (mini-CQE 0 its first 8 bytes).
            unsafe {
                std::ptr::write(buf.as_mut_ptr().add(7 * 8).cast::<Cqe64>(), title);
                std::ptr::write(buf.as_mut_ptr().cast::<MiniCqe>(), m);
            }
            let mut dbrec = [Be32::default(); 2];
            let mut uar = [0u64; 8];
            // SAFETY: test memory of the sizes `from_raw` asks for; `buf`
            // comes from a mutable pointer and only this ring writes it.
            let mut ring = unsafe {
                CqRing::from_raw(
                    buf.as_mut_ptr().cast_const().cast(),
                    8,
                    64,
                    dbrec.as_mut_ptr(),
                    uar.as_mut_ptr().cast(),
                    1,
                )
            };
            // SAFETY: as above.
            unsafe { ring.set_compression(Some(CqeResFormat::Hash)) };
            ring.start_at(7);
            let mut out = [Completion::default(); 16];
            assert_eq!(ring.poll(&mut out), 1, "count {count}");
            let want = expand(&title, &m, 0, Some(CqeResFormat::Hash), 0);
            assert!(out[0].tail == want.tail() && out[0].expanded(), "count {count}: {:?}", out[0]);
            assert_eq!(out[0].byte_len(), 77);
            assert_eq!(buf[7 * 8 + 7].to_ne_bytes()[7], 0xf0, "count {count}: the title's entry marked");
            assert_eq!(ring.consumer_index(), 8);
        }
    }

    /// Every CQE the ring expands, through `poll` (completions, in calls of
    /// 3 that split arrays and sessions, and in calls of 64 that take each
    /// session whole where it ends before the ring's end) and through
    /// `poll_cqes` (whole CQEs), is what `mini::expand` makes of its title
    /// and mini-CQE, for each format and for a requester session, across
    /// two laps of the ring.
    #[test]
    fn sessions_expand_as_mini_expand_says_through_both_pollers() {
        use crate::mlx5dv::completion::mini::{expand, MiniCqe};
        use crate::mlx5dv::queue::be::Be16;
        const CNT: u32 = 16;
        // Sessions that end before the ring's end (taken whole by `poll`
        // when they fit), that end at it, that cross it, on laps 0 to 3,
        // over one and two mini-CQE arrays, and one of a whole ring.
        const LENS: [u32; 7] = [11, 5, 8, 11, 3, 9, 16];
        let formats = [None, Some(CqeResFormat::Hash), Some(CqeResFormat::Csum), Some(CqeResFormat::CsumStridx)];
        for (f, op) in formats.iter().map(|&f| (f, CqeOpcode::RESP_SEND)).chain([(None, CqeOpcode::REQ)]) {
            for (whole, batch) in [(false, 3), (false, 64), (true, 0)] {
                let mut buf = vec![0u64; 8 * CNT as usize];
                for i in 0..CNT as usize {
                    buf[i * 8 + 7] = u64::from_ne_bytes([0, 0, 0, 0, 0, 0, 0, 0xf1]);
                }
                let mut dbrec = [Be32::default(); 2];
                let mut uar = [0u64; 8];
                let base = buf.as_mut_ptr();
                // SAFETY: test memory of the sizes `from_raw` asks for,
                // writable, written by this test between polls only.
                let mut ring = unsafe {
                    CqRing::from_raw(base.cast_const().cast(), CNT, 64, dbrec.as_mut_ptr(), uar.as_mut_ptr().cast(), 1)
                };
                // SAFETY: as above.
                unsafe { ring.set_compression(f) };
                let mut pos = 0u32;
                for (s, len) in (0u32..).zip(LENS) {
                    let mut title = Cqe64 {
                        byte_cnt: Be32::new(len),
                        sop_drop_qpn: Be32::new(0x0a00_0000 | 0x1234),
                        wqe_counter: Be16::new(0xfffau16.wrapping_add(s as u16)),
                        op_own: (op.to_raw() << 4) | (CqeFormat::COMPRESSED.to_raw() << 2) | 2,
                        ..Cqe64::default()
                    };
                    title.rsvd0 = std::array::from_fn(|k| 0x40 + k as u8 + s as u8);
                    title.timestamp = crate::mlx5dv::queue::be::Be64::new(0x1122_3344_5566_7788);
                    let minis: Vec<MiniCqe> = (0..len)
                        .map(|i| MiniCqe {
                            info: [i as u8, 0x80 | i as u8, 0x0a + s as u8, 0xc0 | i as u8],
                            byte_cnt: Be32::new(0x100 * (s + 1) + i),
                        })
                        .collect();
                    let at = |k: u32| ((pos + k) % CNT) as usize * 8;
                    let owner = |k: u32| u8::from((pos + k) & CNT != 0);
                    let mut t = title;
                    t.op_own |= owner(0);
                    // SAFETY: `Cqe64` is 64 plain bytes.
                    let tw: [u64; 8] = unsafe { std::mem::transmute(t) };
                    buf[at(0)..at(0) + 8].copy_from_slice(&tw);
                    for k in 0..len {
                        let (entry, slot) = mini::position(k);
                        let m = minis[k as usize];
                        let mw = u64::from_ne_bytes([
                            m.info[0],
                            m.info[1],
                            m.info[2],
                            m.info[3],
                            m.byte_cnt.raw().to_ne_bytes()[0],
                            m.byte_cnt.raw().to_ne_bytes()[1],
                            m.byte_cnt.raw().to_ne_bytes()[2],
                            m.byte_cnt.raw().to_ne_bytes()[3],
                        ]);
                        buf[at(entry) + slot as usize] = mw;
                    }
                    let want: Vec<Cqe64> =
                        (0..len).map(|k| expand(&title, &minis[k as usize], k, f, owner(k))).collect();
                    if whole {
                        let mut got = vec![Cqe64::default(); len as usize];
                        assert_eq!(ring.poll_cqes(&mut got), len as usize);
                        assert_eq!(got.to_vec(), want, "{f:?} {op:?} session {s}");
                    } else {
                        let mut got = Vec::new();
                        let mut out = vec![Completion::default(); batch];
                        loop {
                            let n = ring.poll(&mut out);
                            if n == 0 {
                                break;
                            }
                            got.extend_from_slice(&out[..n]);
                        }
                        assert_eq!(got.len(), len as usize, "{f:?} {op:?} session {s}, batch {batch}");
                        for (k, (c, w)) in got.iter().zip(&want).enumerate() {
                            assert!(c.expanded());
                            let ticket = c.ticket();
                            assert_eq!(
                                (ticket.cq, ticket.seq),
                                (ring.uid(), u64::from(pos + k as u32)),
                                "{f:?} {op:?} session {s} CQE {k}, batch {batch}: stamped with its ring and position"
                            );
                            assert!(
                                c.tail == w.tail(),
                                "{f:?} {op:?} session {s} CQE {k}, batch {batch}: {c:?} against {:?}",
                                w.decode()
                            );
                        }
                    }
                    // Each entry of the session taken is marked invalid with
                    // its lap's owner bit, so that none reads valid a lap on.
                    for k in 0..len {
                        let op_own = buf[at(k) + 7].to_ne_bytes()[7];
                        assert_eq!(op_own, 0xf0 | owner(k), "{f:?} {op:?} session {s} entry {k}, batch {batch}");
                    }
                    pos += len;
                }
            }
        }
    }

    /// Random rings (every format, both CQE sizes, requester and receive
    /// sessions of 1 to 16 CQEs and CQEs written whole, across the ring's
    /// end, lap after lap) polled twice: through `poll` in calls of 1 to 40
    /// completions (sessions taken whole where they fit and end before the
    /// ring's end, split otherwise) and through `poll_cqes`, the path the
    /// kernel oracle and the libmlx5 harness check. Every completion is
    /// the same CQE (bytes 8-63), expanded exactly where the CQE came from a
    /// session, stamped with its ring and position, and the two rings are
    /// left with the same bytes.
    #[test]
    fn poll_expands_every_session_as_poll_cqes_does() {
        const CNT: u32 = 16;
        let mut seed = 0x5eed_u64;
        let mut next = move || {
            // splitmix64
            seed = seed.wrapping_add(0x9e37_79b9_7f4a_7c15);
            let mut z = seed;
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            z ^ (z >> 31)
        };
        let formats = [None, Some(CqeResFormat::Hash), Some(CqeResFormat::Csum), Some(CqeResFormat::CsumStridx)];
        let mut whole_sessions = 0;
        for f in formats {
            for size in [64u32, 128] {
                let words = (size / 8) as usize;
                let fresh = |v: &mut Vec<u64>| {
                    for i in 0..CNT as usize {
                        v[i * words + words - 1] = u64::from_ne_bytes([0, 0, 0, 0, 0, 0, 0, 0xf1]);
                    }
                };
                let (mut a, mut b) = (vec![0u64; words * CNT as usize], vec![0u64; words * CNT as usize]);
                fresh(&mut a);
                fresh(&mut b);
                let (mut dba, mut dbb) = ([Be32::default(); 2], [Be32::default(); 2]);
                let (mut ua, mut ub) = ([0u64; 8], [0u64; 8]);
                // SAFETY: test memory of the sizes `from_raw` asks for,
                // writable, written by this test between polls only.
                let (mut ra, mut rb) = unsafe {
                    (
                        CqRing::from_raw(
                            a.as_mut_ptr().cast_const().cast(),
                            CNT,
                            size,
                            dba.as_mut_ptr(),
                            ua.as_mut_ptr().cast(),
                            1,
                        ),
                        CqRing::from_raw(
                            b.as_mut_ptr().cast_const().cast(),
                            CNT,
                            size,
                            dbb.as_mut_ptr(),
                            ub.as_mut_ptr().cast(),
                            2,
                        ),
                    )
                };
                // SAFETY: as above.
                unsafe {
                    ra.set_compression(f);
                    rb.set_compression(f);
                }
                let mut pos = 0u32;
                for _ in 0..300 {
                    // The device's side: CQEs and sessions filling up to a ring.
                    let mut expanded = Vec::new();
                    let mut room = CNT;
                    while room > 0 && next() % 4 != 0 {
                        let title_at = |k: u32| ((pos + k) % CNT) as usize * words + words - 8;
                        let owner = |k: u32| u8::from((pos + k) & CNT != 0);
                        let mut w: [u64; 8] = std::array::from_fn(|_| next());
                        // A session has 2 CQEs at least (its first array is
                        // in its second CQE's entry).
                        let len =
                            if room < 2 || next() % 3 == 0 { 1 } else { 2 + (next() % u64::from(room - 1)) as u32 };
                        let op =
                            [CqeOpcode::RESP_SEND, CqeOpcode::REQ, CqeOpcode::RESP_SEND_IMM][(next() % 3) as usize];
                        let mut last = w[7].to_ne_bytes();
                        if len == 1 {
                            // A CQE written whole.
                            last[7] = (op.to_raw() << 4) | (((next() % 3) as u8) << 2) | (last[7] & 2) | owner(0);
                            w[7] = u64::from_ne_bytes(last);
                            expanded.push(false);
                        } else {
                            last[7] =
                                (op.to_raw() << 4) | (CqeFormat::COMPRESSED.to_raw() << 2) | (last[7] & 2) | owner(0);
                            w[7] = u64::from_ne_bytes(last);
                            let mut five = w[5].to_ne_bytes();
                            five[4..8].copy_from_slice(&Be32::new(len).raw().to_ne_bytes());
                            w[5] = u64::from_ne_bytes(five);
                            for k in 0..len {
                                let (entry, slot) = mini::position(k);
                                let m = next();
                                for v in [&mut a, &mut b] {
                                    v[title_at(entry) + slot as usize] = m;
                                }
                            }
                            expanded.extend((0..len).map(|_| true));
                            whole_sessions += usize::from(len <= CNT - pos % CNT);
                        }
                        for v in [&mut a, &mut b] {
                            v[title_at(0)..title_at(0) + 8].copy_from_slice(&w);
                        }
                        room -= len;
                        pos += len;
                    }
                    // Both pollers drain the ring.
                    let mut got = Vec::new();
                    loop {
                        let mut out = vec![Completion::default(); 1 + (next() % 40) as usize];
                        let n = ra.poll(&mut out);
                        got.extend_from_slice(&out[..n]);
                        if n == 0 {
                            break;
                        }
                    }
                    let mut want = Vec::new();
                    loop {
                        let mut out = vec![Cqe64::default(); 1 + (next() % 16) as usize];
                        let n = rb.poll_cqes(&mut out);
                        want.extend_from_slice(&out[..n]);
                        if n == 0 {
                            break;
                        }
                    }
                    assert_eq!(got.len(), expanded.len(), "{f:?} {size} B: CQEs taken by poll");
                    assert_eq!(want.len(), expanded.len(), "{f:?} {size} B: CQEs taken by poll_cqes");
                    let first = pos as u64 - expanded.len() as u64;
                    for (k, ((c, w), e)) in got.iter().zip(&want).zip(&expanded).enumerate() {
                        let at = first + k as u64;
                        assert!(c.tail == w.tail(), "{f:?} {size} B, CQE {at}: {c:?} against {:?}", w.decode());
                        assert_eq!(c.expanded(), *e, "{f:?} {size} B, CQE {at}: expanded");
                        assert_eq!((c.ticket().cq, c.ticket().seq), (ra.uid(), at), "{f:?} {size} B, CQE {at}: stamp");
                    }
                    assert_eq!(a, b, "{f:?} {size} B: the rings after the drain (marks)");
                    assert_eq!(ra.consumer_index(), rb.consumer_index());
                    assert_eq!(dba[0], dbb[0], "{f:?} {size} B: consumer records");
                }
            }
        }
        assert!(whole_sessions > 1000, "sessions that end before the ring's end: {whole_sessions}");
    }
}
