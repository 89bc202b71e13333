//! NIC scheduling elements: a tree of bandwidth-sharing nodes (TSARs with
//! deficit weighted round robin) whose leaves are queue groups that QPs
//! send through. What `mlx5dv_sched_node_create`, `_leaf_create`,
//! `_node_modify`, `_leaf_modify` and `mlx5dv_modify_qp_sched_elem` send,
//! built here as general objects (`CREATE_GENERAL_OBJECT` of type
//! `SCHEDULING_ELEMENT`) and compared with libmlx5 v59's bytes in the
//! harness (`tests/provider/devx.rs`).
//!
//! A child holds its parent, so a node outlives every element under it; a
//! QP attached to a leaf keeps sending through it until it is attached
//! elsewhere (the firmware refuses to destroy a leaf a QP still uses).

use std::sync::Arc;

use super::context::DevxContext;
use super::obj::{DevxObj, Held};
use super::verbs::qp_modify;
use crate::mlx5dv::prm::{self, Field, ObjType, Opcode, QpcOptMask32};
use crate::prim::{Qp, Result};

/// `sched_elem` (rdma-core v59's `mlx5_ifc.h`; not in Linux 6.1's header)
/// after the 16-byte general-object header: which attributes the command
/// sets, and the hierarchy.
const MODIFY_FIELD_SELECT: Field = Field::new("modify_field_select", 0x80, 64);
const SCHEDULING_HIERARCHY: Field = Field::new("scheduling_hierarchy", 0xc0, 8);
/// Where `sched_elem.sched_context` starts, in bytes (bit 0x180): the same
/// layout as the kernel's `scheduling_context` ([`prm::SchedulingContext`]).
const CONTEXT_AT: usize = 0x180 / 8;
/// `MLX5_SCHED_HIERARCHY_NIC`.
const HIERARCHY_NIC: u64 = 3;
/// `MODIFY_FIELD_SELECT` bits (`MLX5DV_SCHED_ELEM_ATTR_FLAGS_*`).
const SELECT_BW_SHARE: u64 = 1 << 0;
const SELECT_MAX_AVG_BW: u64 = 1 << 1;

/// The bytes of a create or modify command (`create_sched_elem_in`).
pub const SCHED_IN_BYTES: usize = 0x480 / 8;

/// What a scheduling element is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SchedKind {
    /// A node (`MLX5_SCHED_ELEM_TYPE_TSAR`, deficit weighted round robin
    /// among its children).
    Node,
    /// A leaf (`MLX5_SCHED_ELEM_TYPE_QUEUE_GROUP`): QPs are attached to it.
    Leaf,
}

impl SchedKind {
    const fn element_type(self) -> u32 {
        match self {
            SchedKind::Node => 0x0,
            SchedKind::Leaf => 0x4,
        }
    }
}

/// An element's bandwidth attributes; `None` leaves one unset (the device's
/// default on create, unchanged on modify).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SchedAttr {
    /// The element's weight among its siblings (`bw_share`).
    pub bw_share: Option<u32>,
    /// The element's rate limit (`max_average_bw`, in the device's units:
    /// Mbit/s on ConnectX).
    pub max_avg_bw: Option<u32>,
}

impl SchedAttr {
    fn select(&self) -> u64 {
        let mut s = 0;
        if self.bw_share.is_some() {
            s |= SELECT_BW_SHARE;
        }
        if self.max_avg_bw.is_some() {
            s |= SELECT_MAX_AVG_BW;
        }
        s
    }

    fn is_empty(&self) -> bool {
        self.select() == 0
    }
}

fn sched_cmd(opcode: Opcode, obj_id: u32, kind: SchedKind, parent: Option<u32>, attr: &SchedAttr) -> Vec<u8> {
    let mut b = vec![0u8; SCHED_IN_BYTES];
    let hdr: &mut [u8; prm::GeneralObjInCmdHdr::BYTES] =
        (&mut b[..prm::GeneralObjInCmdHdr::BYTES]).try_into().expect("the header's 16 bytes");
    prm::GeneralObjInCmdHdr::from_mut(hdr)
        .set_opcode(opcode.0.into())
        .set_obj_type(ObjType::SCHEDULING_ELEMENT.0.into())
        .set_obj_id(obj_id);
    MODIFY_FIELD_SELECT.set(&mut b, attr.select());
    SCHEDULING_HIERARCHY.set(&mut b, HIERARCHY_NIC);
    let ctx: &mut [u8; prm::SchedulingContext::BYTES] =
        (&mut b[CONTEXT_AT..CONTEXT_AT + prm::SchedulingContext::BYTES]).try_into().expect("the context's bytes");
    let c = prm::SchedulingContext::from_mut(ctx);
    // The node's arbitration (`tsar_type`, DWRR) is 0: nothing to write.
    c.set_element_type(kind.element_type());
    if let Some(p) = parent {
        c.set_parent_element_id(p);
    }
    if let Some(w) = attr.bw_share {
        c.set_bw_share(w);
    }
    if let Some(r) = attr.max_avg_bw {
        c.set_max_average_bw(r);
    }
    b
}

/// `CREATE_GENERAL_OBJECT` of a scheduling element of `kind` under the
/// element `parent` (0: the root), with `attr`: what
/// `mlx5dv_sched_node_create` / `_leaf_create` send.
pub fn create_cmd(kind: SchedKind, parent: u32, attr: &SchedAttr) -> Vec<u8> {
    sched_cmd(Opcode::CREATE_GENERAL_OBJECT, 0, kind, Some(parent), attr)
}

/// `MODIFY_GENERAL_OBJECT` of the element `obj_id` of `kind`, setting the
/// attributes `attr` has: what `mlx5dv_sched_node_modify` /
/// `_leaf_modify` send.
pub fn modify_cmd(kind: SchedKind, obj_id: u32, attr: &SchedAttr) -> Vec<u8> {
    sched_cmd(Opcode::MODIFY_GENERAL_OBJECT, obj_id, kind, None, attr)
}

/// `RTS2RTS_QP` that sends `qpn`'s requests through the leaf `requester`
/// and its responses through `responder` (0: none), in the QP context
/// extension: what `mlx5dv_modify_qp_sched_elem` sends for an RC QP in RTS.
pub fn qp_cmd(qpn: u32, requester: u32, responder: u32) -> Vec<u8> {
    let mut c = Box::new(prm::Rts2rtsQpIn::new());
    c.set_opcode(Opcode::RTS2RTS_QP.0.into())
        .set_qpn(qpn)
        .set_qpc_ext(1)
        .set_opt_param_mask_95_32(QpcOptMask32::QOS_QUEUE_GROUP_ID.0);
    c.qpc_data_ext_mut().set_qos_queue_group_id_requester(requester).set_qos_queue_group_id_responder(responder);
    c.0.to_vec()
}

/// A scheduling element: the object and its id (what children and QPs name).
#[derive(Clone, Debug)]
struct Element {
    obj: DevxObj,
    id: u32,
    kind: SchedKind,
}

impl Element {
    fn create(ctx: &DevxContext, kind: SchedKind, parent: Option<&SchedNode>, attr: &SchedAttr) -> Result<Element> {
        let mut out = [0u8; prm::GeneralObjOutCmdHdr::BYTES];
        let held: Vec<Held> = parent.map(|p| Arc::new(p.clone()) as Held).into_iter().collect();
        let parent_id = parent.map_or(0, |p| p.0.id);
        let obj = DevxObj::create(ctx, &create_cmd(kind, parent_id, attr), &mut out, held)?;
        let id = prm::GeneralObjOutCmdHdr::from_ref(&out).obj_id();
        Ok(Element { obj, id, kind })
    }

    fn modify(&self, attr: &SchedAttr) -> Result<()> {
        let mut out = [0u8; prm::GeneralObjOutCmdHdr::BYTES];
        self.obj.modify(&modify_cmd(self.kind, self.id, attr), &mut out)
    }
}

/// A scheduling node (a TSAR): the root of a tree, or a weighted, rate-limited
/// share of its parent. Cloning shares it; destroyed when the last clone and
/// every element under it are gone.
///
/// # References
/// `mlx5dv_sched_node_create(3)`
#[derive(Clone, Debug)]
pub struct SchedNode(Element);

impl SchedNode {
    /// The root node of a tree (no attributes: the root takes the port's bandwidth).
    pub fn root(ctx: &DevxContext) -> Result<SchedNode> {
        Element::create(ctx, SchedKind::Node, None, &SchedAttr::default()).map(SchedNode)
    }

    /// A node under `parent` with `attr`.
    pub fn new(ctx: &DevxContext, parent: &SchedNode, attr: &SchedAttr) -> Result<SchedNode> {
        Element::create(ctx, SchedKind::Node, Some(parent), attr).map(SchedNode)
    }

    /// Sets the attributes `attr` has (the others stay).
    ///
    /// # Panics
    /// If `attr` sets nothing (a programming error: there is nothing to send).
    pub fn modify(&self, attr: &SchedAttr) -> Result<()> {
        assert!(!attr.is_empty(), "SchedNode::modify: the attributes set nothing; give bw_share or max_avg_bw");
        self.0.modify(attr)
    }

    /// The element's id.
    pub fn id(&self) -> u32 {
        self.0.id
    }

    /// The DEVX object.
    pub fn obj(&self) -> &DevxObj {
        &self.0.obj
    }
}

/// A scheduling leaf (a queue group) under a node; QPs send through it
/// ([`SchedLeaf::attach`]).
///
/// # References
/// `mlx5dv_sched_leaf_create(3)`, `mlx5dv_modify_qp_sched_elem(3)`
#[derive(Clone, Debug)]
pub struct SchedLeaf(Element);

impl SchedLeaf {
    /// A leaf under `parent` with `attr`.
    pub fn new(ctx: &DevxContext, parent: &SchedNode, attr: &SchedAttr) -> Result<SchedLeaf> {
        Element::create(ctx, SchedKind::Leaf, Some(parent), attr).map(SchedLeaf)
    }

    /// Sets the attributes `attr` has (the others stay).
    ///
    /// # Panics
    /// If `attr` sets nothing (a programming error: there is nothing to send).
    pub fn modify(&self, attr: &SchedAttr) -> Result<()> {
        assert!(!attr.is_empty(), "SchedLeaf::modify: the attributes set nothing; give bw_share or max_avg_bw");
        self.0.modify(attr)
    }

    /// Sends the requests of `qp` (an RC QP in RTS of a DEVX context)
    /// through `requester` and its responses through `responder`; `None`
    /// detaches that side. As [`super::verbs::qp_modify`] on a device that
    /// is not mlx5.
    pub fn attach(qp: &Qp, requester: Option<&SchedLeaf>, responder: Option<&SchedLeaf>) -> Result<()> {
        let mut out = [0u8; super::cmd::OUT_HDR_BYTES];
        let id = |l: Option<&SchedLeaf>| l.map_or(0, |l| l.0.id);
        qp_modify(qp, &qp_cmd(qp.qpn(), id(requester), id(responder)), &mut out)
    }

    /// The element's id.
    pub fn id(&self) -> u32 {
        self.0.id
    }

    /// The DEVX object.
    pub fn obj(&self) -> &DevxObj {
        &self.0.obj
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The fields land where rdma-core v59's `mlx5_ifc.h` puts them
    /// (`create_sched_elem_in`: the general header, then `sched_elem` at bit
    /// 0x80 with `sched_context` at 0x100 within it).
    #[test]
    fn sched_commands_put_their_fields_where_libmlx5s_header_says() {
        let attr = SchedAttr { bw_share: Some(0x0102_0304), max_avg_bw: Some(0x0a0b_0c0d) };
        let b = create_cmd(SchedKind::Leaf, 0x77, &attr);
        assert_eq!(b.len(), 144);
        assert_eq!(&b[0..2], &[0x0a, 0x00]);
        assert_eq!(&b[6..8], &[0x00, 0x26]);
        assert_eq!(b[0x10 + 7], 3, "modify_field_select");
        assert_eq!(b[0x10 + 8], 3, "scheduling_hierarchy NIC");
        assert_eq!(b[0x30], 4, "element_type queue group");
        assert_eq!(&b[0x38..0x3c], &0x77u32.to_be_bytes(), "parent_element_id");
        assert_eq!(&b[0x44..0x48], &0x0102_0304u32.to_be_bytes(), "bw_share");
        assert_eq!(&b[0x48..0x4c], &0x0a0b_0c0du32.to_be_bytes(), "max_average_bw");
        let m = modify_cmd(SchedKind::Node, 0x1234, &SchedAttr { bw_share: Some(5), max_avg_bw: None });
        assert_eq!(&m[0..2], &[0x0a, 0x01]);
        assert_eq!(&m[8..12], &0x1234u32.to_be_bytes(), "obj_id");
        assert_eq!(m[0x10 + 7], 1);
        assert_eq!(m[0x30], 0, "element_type TSAR");
        assert_eq!(&m[0x48..0x4c], &[0; 4], "max_average_bw left unset");
    }
}
