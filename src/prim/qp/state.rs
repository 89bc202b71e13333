//! The QP state machine: which transitions exist for each transport, and
//! which attributes each requires and allows (the InfiniBand specification's
//! table, as the kernel's `ib_modify_qp_is_ok` encodes it). Checked before the
//! `ibv_modify_qp` system call so that the error can name the attributes.
//!
//! iWARP has its own column for RC: its connection is set up by the iWARP CM
//! in the kernel (MPA over TCP), which moves the QP to RTS itself, and it has
//! neither P_Keys nor InfiniBand paths. `rdma_init_qp_attr` gives `STATE`,
//! `ACCESS_FLAGS` and `PORT` for INIT and `PORT` alone for RTR and RTS, so a
//! P_Key index or a path is never required there.

use super::attr::AttrMask;
use crate::prim::{QpState as S, QpType as T};

/// What a transition requires and allows besides `STATE`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Rule {
    /// Attributes that must be given.
    pub required: AttrMask,
    /// Attributes that may be given.
    pub optional: AttrMask,
}

const fn m(bits: &[AttrMask]) -> AttrMask {
    let mut acc = AttrMask::empty();
    let mut i = 0;
    while i < bits.len() {
        acc = acc.union(bits[i]);
        i += 1;
    }
    acc
}

use AttrMask as A;

const NONE: Rule = Rule { required: AttrMask::empty(), optional: AttrMask::empty() };

const fn rule(required: AttrMask, optional: AttrMask) -> Rule {
    Rule { required, optional }
}

/// The link a QP's device speaks, where the table differs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Fabric {
    /// InfiniBand and RoCE (the specification's table).
    Ib,
    /// iWARP (`IBV_TRANSPORT_IWARP`): RC only.
    Iwarp,
}

/// Transport families that share a column of the table.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Ud,
    Uc,
    Rc,
    XrcIni,
    XrcTgt,
    Raw,
}

const fn kind(t: T) -> Option<Kind> {
    match t {
        T::UD => Some(Kind::Ud),
        T::UC => Some(Kind::Uc),
        T::RC => Some(Kind::Rc),
        T::XRC_SEND => Some(Kind::XrcIni),
        T::XRC_RECV => Some(Kind::XrcTgt),
        T::RAW_PACKET => Some(Kind::Raw),
        _ => None,
    }
}

/// The rule for moving a QP of type `t` on `fabric` from `from` to `to`, or
/// `None` when the transition does not exist (or the type is not one the
/// table knows: driver-specific types are left to the provider).
pub(crate) const fn transition(fabric: Fabric, t: T, from: S, to: S) -> Option<Rule> {
    let Some(k) = kind(t) else { return None };
    if matches!(fabric, Fabric::Iwarp) && matches!(k, Kind::Rc) {
        return iwarp_rc(from, to);
    }
    // Any state may go to RESET or ERR with no other attribute.
    if matches!(to, S::RESET | S::ERR) {
        return Some(NONE);
    }
    let pkey_port = m(&[A::PKEY_INDEX, A::PORT]);
    match (from, to) {
        (S::RESET, S::INIT) => Some(match k {
            Kind::Ud => rule(m(&[pkey_port, A::QKEY]), A::empty()),
            Kind::Raw => rule(A::PORT, A::empty()),
            _ => rule(m(&[pkey_port, A::ACCESS_FLAGS]), A::empty()),
        }),
        (S::INIT, S::INIT) => Some(match k {
            Kind::Ud => rule(A::empty(), m(&[pkey_port, A::QKEY])),
            Kind::Raw => NONE,
            _ => rule(A::empty(), m(&[pkey_port, A::ACCESS_FLAGS])),
        }),
        (S::INIT, S::RTR) => {
            let path = m(&[A::AV, A::PATH_MTU, A::DEST_QPN, A::RQ_PSN]);
            let resp = m(&[path, A::MAX_DEST_RD_ATOMIC, A::MIN_RNR_TIMER]);
            let opt = m(&[A::ALT_PATH, A::ACCESS_FLAGS, A::PKEY_INDEX]);
            Some(match k {
                Kind::Ud => rule(A::empty(), m(&[A::PKEY_INDEX, A::QKEY])),
                Kind::Raw => NONE,
                Kind::Uc | Kind::XrcIni => rule(path, opt),
                Kind::Rc | Kind::XrcTgt => rule(resp, opt),
            })
        }
        (S::RTR, S::RTS) => {
            let req_ack = m(&[A::TIMEOUT, A::RETRY_CNT, A::RNR_RETRY, A::SQ_PSN, A::MAX_QP_RD_ATOMIC]);
            let conn_opt = m(&[A::CUR_STATE, A::ALT_PATH, A::ACCESS_FLAGS, A::PATH_MIG_STATE, A::RATE_LIMIT]);
            Some(match k {
                Kind::Ud => rule(A::SQ_PSN, m(&[A::CUR_STATE, A::QKEY, A::RATE_LIMIT])),
                Kind::Raw => rule(A::empty(), A::RATE_LIMIT),
                Kind::Uc => rule(A::SQ_PSN, conn_opt),
                Kind::XrcIni => rule(req_ack, conn_opt),
                Kind::Rc => rule(req_ack, m(&[conn_opt, A::MIN_RNR_TIMER])),
                Kind::XrcTgt => rule(m(&[A::TIMEOUT, A::SQ_PSN]), m(&[conn_opt, A::MIN_RNR_TIMER])),
            })
        }
        (S::RTS, S::RTS) | (S::SQD, S::RTS) => {
            let conn_opt = m(&[A::CUR_STATE, A::ACCESS_FLAGS, A::ALT_PATH, A::PATH_MIG_STATE, A::RATE_LIMIT]);
            Some(match k {
                Kind::Ud => rule(A::empty(), m(&[A::CUR_STATE, A::QKEY, A::RATE_LIMIT])),
                Kind::Raw => NONE,
                Kind::Uc | Kind::XrcIni => rule(A::empty(), conn_opt),
                Kind::Rc | Kind::XrcTgt => rule(A::empty(), m(&[conn_opt, A::MIN_RNR_TIMER])),
            })
        }
        (S::RTS, S::SQD) => Some(match k {
            Kind::Raw => NONE,
            _ => rule(A::empty(), A::EN_SQD_ASYNC_NOTIFY),
        }),
        (S::SQD, S::SQD) => Some({
            let sqd_rc = m(&[
                A::PORT,
                A::AV,
                A::TIMEOUT,
                A::RETRY_CNT,
                A::RNR_RETRY,
                A::MAX_QP_RD_ATOMIC,
                A::MAX_DEST_RD_ATOMIC,
                A::ALT_PATH,
                A::ACCESS_FLAGS,
                A::PKEY_INDEX,
                A::MIN_RNR_TIMER,
                A::PATH_MIG_STATE,
            ]);
            match k {
                Kind::Ud => rule(A::empty(), m(&[A::PKEY_INDEX, A::QKEY])),
                Kind::Raw => NONE,
                Kind::Uc => {
                    rule(A::empty(), m(&[A::AV, A::ALT_PATH, A::ACCESS_FLAGS, A::PKEY_INDEX, A::PATH_MIG_STATE]))
                }
                // XRC initiators have no responder side; targets no requester side.
                Kind::XrcIni => rule(A::empty(), sqd_rc.difference(m(&[A::MAX_DEST_RD_ATOMIC, A::MIN_RNR_TIMER]))),
                Kind::XrcTgt => {
                    rule(A::empty(), sqd_rc.difference(m(&[A::RETRY_CNT, A::RNR_RETRY, A::MAX_QP_RD_ATOMIC])))
                }
                Kind::Rc => rule(A::empty(), sqd_rc),
            }
        }),
        (S::SQE, S::RTS) => Some(match k {
            Kind::Ud => rule(A::empty(), m(&[A::CUR_STATE, A::QKEY])),
            Kind::Raw => NONE,
            Kind::Uc => rule(A::empty(), m(&[A::CUR_STATE, A::ACCESS_FLAGS])),
            // SQE exists only for unreliable transports.
            _ => return None,
        }),
        _ => None,
    }
}

/// iWARP RC: the states and their order are the specification's, but the
/// only attribute the kernel's iWARP providers take from user space is the
/// access flags (required on RESET → INIT, as for RC on InfiniBand); the
/// port, the P_Key index and the InfiniBand path and timer attributes are
/// accepted wherever InfiniBand takes them, and ignored by the provider.
const fn iwarp_rc(from: S, to: S) -> Option<Rule> {
    let Some(ib) = transition(Fabric::Ib, T::RC, from, to) else { return None };
    let anything = m(&[ib.required, ib.optional, A::PORT, A::PKEY_INDEX]);
    Some(match (from, to) {
        (S::RESET, S::INIT) => rule(A::ACCESS_FLAGS, anything.difference(A::ACCESS_FLAGS)),
        _ => rule(A::empty(), anything),
    })
}

/// Why a modify was refused before reaching the kernel.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refusal {
    /// No such transition for this QP type.
    NoTransition,
    /// The transition exists but the attributes do not fit it.
    Attributes {
        /// Required attributes that were not given.
        missing: AttrMask,
        /// Given attributes the transition does not accept.
        forbidden: AttrMask,
    },
}

/// Checks `mask` (which includes `STATE`) for `t` on `fabric` moving
/// `from` → `to`. Types the table does not know pass unchecked.
pub(crate) fn check(fabric: Fabric, t: T, from: S, to: S, mask: AttrMask) -> Result<(), Refusal> {
    if kind(t).is_none() {
        return Ok(());
    }
    let Some(r) = transition(fabric, t, from, to) else { return Err(Refusal::NoTransition) };
    let given = mask - AttrMask::STATE;
    let missing = r.required - given;
    // Packet pacing is left to the provider: kernels differ on where they allow it.
    let forbidden = given - (r.required | r.optional) - AttrMask::RATE_LIMIT;
    if missing.is_empty() && forbidden.is_empty() {
        Ok(())
    } else {
        Err(Refusal::Attributes { missing, forbidden })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ALL_STATES: [S; 7] = [S::RESET, S::INIT, S::RTR, S::RTS, S::SQD, S::SQE, S::ERR];

    #[test]
    fn rc_bring_up_needs_exactly_the_spec_attributes() {
        let init = A::STATE | A::PKEY_INDEX | A::PORT | A::ACCESS_FLAGS;
        assert_eq!(check(Fabric::Ib, T::RC, S::RESET, S::INIT, init), Ok(()));
        let e = check(Fabric::Ib, T::RC, S::RESET, S::INIT, A::STATE | A::PORT | A::QKEY);
        assert_eq!(e, Err(Refusal::Attributes { missing: A::PKEY_INDEX | A::ACCESS_FLAGS, forbidden: A::QKEY }));
        let rtr = A::STATE | A::AV | A::PATH_MTU | A::DEST_QPN | A::RQ_PSN | A::MAX_DEST_RD_ATOMIC;
        assert_eq!(
            check(Fabric::Ib, T::RC, S::INIT, S::RTR, rtr),
            Err(Refusal::Attributes { missing: A::MIN_RNR_TIMER, forbidden: A::empty() })
        );
        let rts = A::STATE | A::TIMEOUT | A::RETRY_CNT | A::RNR_RETRY | A::SQ_PSN | A::MAX_QP_RD_ATOMIC;
        assert_eq!(check(Fabric::Ib, T::RC, S::RTR, S::RTS, rts), Ok(()));
    }

    #[test]
    fn ud_and_uc_differ_from_rc() {
        let ud_init = A::STATE | A::PKEY_INDEX | A::PORT | A::QKEY;
        assert_eq!(check(Fabric::Ib, T::UD, S::RESET, S::INIT, ud_init), Ok(()));
        assert_eq!(check(Fabric::Ib, T::UD, S::INIT, S::RTR, A::STATE), Ok(()));
        assert_eq!(check(Fabric::Ib, T::UD, S::RTR, S::RTS, A::STATE | A::SQ_PSN), Ok(()));
        let uc_rtr = A::STATE | A::AV | A::PATH_MTU | A::DEST_QPN | A::RQ_PSN;
        assert_eq!(check(Fabric::Ib, T::UC, S::INIT, S::RTR, uc_rtr), Ok(()));
        assert_eq!(
            check(Fabric::Ib, T::UC, S::RTR, S::RTS, A::STATE | A::SQ_PSN | A::TIMEOUT),
            Err(Refusal::Attributes { missing: A::empty(), forbidden: A::TIMEOUT })
        );
    }

    #[test]
    fn reset_and_err_are_reachable_from_every_state() {
        for t in [T::RC, T::UC, T::UD, T::XRC_SEND, T::XRC_RECV] {
            for from in ALL_STATES {
                assert_eq!(check(Fabric::Ib, t, from, S::RESET, A::STATE), Ok(()));
                assert_eq!(check(Fabric::Ib, t, from, S::ERR, A::STATE), Ok(()));
            }
        }
    }

    #[test]
    fn skipping_states_is_refused() {
        for t in [T::RC, T::UD] {
            assert_eq!(check(Fabric::Ib, t, S::RESET, S::RTS, A::STATE), Err(Refusal::NoTransition));
            assert_eq!(check(Fabric::Ib, t, S::INIT, S::RTS, A::STATE), Err(Refusal::NoTransition));
            assert_eq!(check(Fabric::Ib, t, S::RTS, S::RTR, A::STATE), Err(Refusal::NoTransition));
        }
        assert_eq!(check(Fabric::Ib, T::RC, S::SQE, S::RTS, A::STATE), Err(Refusal::NoTransition));
        // XRC initiators take no RNR timer (they receive nothing).
        let rts = A::STATE | A::TIMEOUT | A::RETRY_CNT | A::RNR_RETRY | A::SQ_PSN | A::MAX_QP_RD_ATOMIC;
        assert_eq!(
            check(Fabric::Ib, T::XRC_SEND, S::RTR, S::RTS, rts | A::MIN_RNR_TIMER),
            Err(Refusal::Attributes { missing: A::empty(), forbidden: A::MIN_RNR_TIMER })
        );
        // Packet pacing is never refused here.
        assert_eq!(check(Fabric::Ib, T::RC, S::RTR, S::RTS, rts | A::RATE_LIMIT), Ok(()));
        // Unknown states and types never panic.
        assert_eq!(check(Fabric::Ib, T::RC, S::from_raw(77), S::from_raw(99), A::STATE), Err(Refusal::NoTransition));
        assert_eq!(check(Fabric::Ib, T::from_raw(0xff), S::RESET, S::RTS, A::STATE), Ok(()));
    }

    #[test]
    fn iwarp_rc_needs_no_pkey_index_and_takes_what_its_cm_gives() {
        let w = Fabric::Iwarp;
        // What rdma_init_qp_attr gives on iWARP: INIT with access flags and
        // the port, RTR and RTS with the port alone.
        assert_eq!(check(w, T::RC, S::RESET, S::INIT, A::STATE | A::ACCESS_FLAGS | A::PORT), Ok(()));
        assert_eq!(check(w, T::RC, S::INIT, S::INIT, A::STATE | A::ACCESS_FLAGS | A::PORT), Ok(()));
        assert_eq!(check(w, T::RC, S::INIT, S::RTR, A::STATE | A::PORT), Ok(()));
        assert_eq!(check(w, T::RC, S::RTR, S::RTS, A::STATE | A::PORT), Ok(()));
        // The InfiniBand attribute sets are accepted too (the provider ignores them).
        let ib_init = A::STATE | A::PKEY_INDEX | A::PORT | A::ACCESS_FLAGS;
        assert_eq!(check(w, T::RC, S::RESET, S::INIT, ib_init), Ok(()));
        let rts = A::STATE | A::TIMEOUT | A::RETRY_CNT | A::RNR_RETRY | A::SQ_PSN | A::MAX_QP_RD_ATOMIC;
        assert_eq!(check(w, T::RC, S::RTR, S::RTS, rts), Ok(()));
        // Still refused: no access flags on RESET -> INIT, attributes the
        // transition never takes, and transitions that do not exist.
        assert_eq!(
            check(w, T::RC, S::RESET, S::INIT, A::STATE | A::PORT | A::QKEY),
            Err(Refusal::Attributes { missing: A::ACCESS_FLAGS, forbidden: A::QKEY })
        );
        assert_eq!(check(w, T::RC, S::RESET, S::RTS, A::STATE), Err(Refusal::NoTransition));
        assert_eq!(check(w, T::RC, S::SQE, S::RTS, A::STATE), Err(Refusal::NoTransition));
        assert_eq!(check(w, T::RC, S::RTS, S::ERR, A::STATE), Ok(()));
        // InfiniBand and RoCE keep the specification's requirement.
        assert_eq!(
            check(Fabric::Ib, T::RC, S::RESET, S::INIT, A::STATE | A::ACCESS_FLAGS | A::PORT),
            Err(Refusal::Attributes { missing: A::PKEY_INDEX, forbidden: A::empty() })
        );
        assert_eq!(
            check(Fabric::Ib, T::RC, S::INIT, S::RTR, A::STATE | A::PORT),
            Err(Refusal::Attributes {
                missing: A::AV | A::PATH_MTU | A::DEST_QPN | A::RQ_PSN | A::MAX_DEST_RD_ATOMIC | A::MIN_RNR_TIMER,
                forbidden: A::PORT
            })
        );
    }
}
