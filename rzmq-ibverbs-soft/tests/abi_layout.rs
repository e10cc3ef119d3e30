//! The `#[repr(C)]` mirrors in `src/abi.rs` have the layout of rdma-mummy-sys' bindgen types
//! (rdma-core's `verbs.h`): sizes, alignments and every field's offset.

#[path = "../src/abi.rs"]
#[allow(unreachable_pub)] // the library's public module, compiled here as a private one
mod abi;

use std::mem::{align_of, offset_of, size_of};

use rdma_mummy_sys as sys;

macro_rules! same {
    ($ours:ident, $sys:ident $(, $f:ident => $g:ident)* $(,)?) => {{
        assert_eq!(size_of::<abi::$ours>(), size_of::<sys::$sys>(), "size of {}", stringify!($ours));
        assert_eq!(align_of::<abi::$ours>(), align_of::<sys::$sys>(), "align of {}", stringify!($ours));
        $(
            assert_eq!(
                offset_of!(abi::$ours, $f),
                offset_of!(sys::$sys, $g),
                "offset of {}.{}", stringify!($ours), stringify!($f)
            );
        )*
    }};
}

#[test]
fn mirrors_match_rdma_core_layouts() {
    same!(ibv_device, ibv_device, _ops => _ops, node_type => node_type,
        transport_type => transport_type, name => name, dev_name => dev_name,
        dev_path => dev_path, ibdev_path => ibdev_path);
    same!(_ibv_device_ops, _ibv_device_ops, _dummy1 => _dummy1, _dummy2 => _dummy2);
    same!(ibv_context_ops, ibv_context_ops,
        _compat_query_device => _compat_query_device, _compat_query_port => _compat_query_port,
        _compat_alloc_pd => _compat_alloc_pd, _compat_dealloc_pd => _compat_dealloc_pd,
        _compat_reg_mr => _compat_reg_mr, _compat_rereg_mr => _compat_rereg_mr,
        _compat_dereg_mr => _compat_dereg_mr, alloc_mw => alloc_mw, bind_mw => bind_mw,
        dealloc_mw => dealloc_mw, _compat_create_cq => _compat_create_cq, poll_cq => poll_cq,
        req_notify_cq => req_notify_cq, _compat_cq_event => _compat_cq_event,
        _compat_resize_cq => _compat_resize_cq, _compat_destroy_cq => _compat_destroy_cq,
        _compat_create_srq => _compat_create_srq, _compat_modify_srq => _compat_modify_srq,
        _compat_query_srq => _compat_query_srq, _compat_destroy_srq => _compat_destroy_srq,
        post_srq_recv => post_srq_recv, _compat_create_qp => _compat_create_qp,
        _compat_query_qp => _compat_query_qp, _compat_modify_qp => _compat_modify_qp,
        _compat_destroy_qp => _compat_destroy_qp, post_send => post_send, post_recv => post_recv,
        _compat_create_ah => _compat_create_ah, _compat_destroy_ah => _compat_destroy_ah,
        _compat_attach_mcast => _compat_attach_mcast, _compat_detach_mcast => _compat_detach_mcast,
        _compat_async_event => _compat_async_event);
    same!(ibv_context, ibv_context, device => device, ops => ops, cmd_fd => cmd_fd,
        async_fd => async_fd, num_comp_vectors => num_comp_vectors, mutex => mutex,
        abi_compat => abi_compat);
    // pthread_mutex_t / pthread_cond_t are private opaque types in rdma-mummy-sys: their sizes
    // are checked through the offsets that follow them in ibv_context, ibv_cq and ibv_qp.
    same!(ibv_device_attr, ibv_device_attr, fw_ver => fw_ver, node_guid => node_guid,
        sys_image_guid => sys_image_guid, max_mr_size => max_mr_size,
        page_size_cap => page_size_cap, vendor_id => vendor_id, vendor_part_id => vendor_part_id,
        hw_ver => hw_ver, max_qp => max_qp, max_qp_wr => max_qp_wr,
        device_cap_flags => device_cap_flags, max_sge => max_sge, max_sge_rd => max_sge_rd,
        max_cq => max_cq, max_cqe => max_cqe, max_mr => max_mr, max_pd => max_pd,
        max_qp_rd_atom => max_qp_rd_atom, max_ee_rd_atom => max_ee_rd_atom,
        max_res_rd_atom => max_res_rd_atom, max_qp_init_rd_atom => max_qp_init_rd_atom,
        max_ee_init_rd_atom => max_ee_init_rd_atom, atomic_cap => atomic_cap, max_ee => max_ee,
        max_rdd => max_rdd, max_mw => max_mw, max_raw_ipv6_qp => max_raw_ipv6_qp,
        max_raw_ethy_qp => max_raw_ethy_qp, max_mcast_grp => max_mcast_grp,
        max_mcast_qp_attach => max_mcast_qp_attach,
        max_total_mcast_qp_attach => max_total_mcast_qp_attach, max_ah => max_ah,
        max_fmr => max_fmr, max_map_per_fmr => max_map_per_fmr, max_srq => max_srq,
        max_srq_wr => max_srq_wr, max_srq_sge => max_srq_sge, max_pkeys => max_pkeys,
        local_ca_ack_delay => local_ca_ack_delay, phys_port_cnt => phys_port_cnt);
    same!(ibv_port_attr, ibv_port_attr, state => state, max_mtu => max_mtu,
        active_mtu => active_mtu, gid_tbl_len => gid_tbl_len, port_cap_flags => port_cap_flags,
        max_msg_sz => max_msg_sz, bad_pkey_cntr => bad_pkey_cntr,
        qkey_viol_cntr => qkey_viol_cntr, pkey_tbl_len => pkey_tbl_len, lid => lid,
        sm_lid => sm_lid, lmc => lmc, max_vl_num => max_vl_num, sm_sl => sm_sl,
        subnet_timeout => subnet_timeout, init_type_reply => init_type_reply,
        active_width => active_width, active_speed => active_speed, phys_state => phys_state,
        link_layer => link_layer, flags => flags, port_cap_flags2 => port_cap_flags2,
        active_speed_ex => active_speed_ex);
    same!(ibv_gid, ibv_gid, raw => raw, global => global);
    same!(ibv_gid_global, ibv_gid_global_t, subnet_prefix => subnet_prefix,
        interface_id => interface_id);
    same!(ibv_pd, ibv_pd, context => context, handle => handle);
    same!(ibv_mr, ibv_mr, context => context, pd => pd, addr => addr, length => length,
        handle => handle, lkey => lkey, rkey => rkey);
    same!(ibv_mw, ibv_mw, context => context, pd => pd, rkey => rkey, handle => handle,
        type_ => type_);
    same!(ibv_mw_bind_info, ibv_mw_bind_info, mr => mr, addr => addr, length => length,
        mw_access_flags => mw_access_flags);
    same!(ibv_mw_bind, ibv_mw_bind, wr_id => wr_id, send_flags => send_flags,
        bind_info => bind_info);
    same!(ibv_comp_channel, ibv_comp_channel, context => context, fd => fd, refcnt => refcnt);
    same!(ibv_cq, ibv_cq, context => context, channel => channel, cq_context => cq_context,
        handle => handle, cqe => cqe, mutex => mutex, cond => cond,
        comp_events_completed => comp_events_completed,
        async_events_completed => async_events_completed);
    same!(ibv_qp_cap, ibv_qp_cap, max_send_wr => max_send_wr, max_recv_wr => max_recv_wr,
        max_send_sge => max_send_sge, max_recv_sge => max_recv_sge,
        max_inline_data => max_inline_data);
    same!(ibv_qp_init_attr, ibv_qp_init_attr, qp_context => qp_context, send_cq => send_cq,
        recv_cq => recv_cq, srq => srq, cap => cap, qp_type => qp_type,
        sq_sig_all => sq_sig_all);
    same!(ibv_global_route, ibv_global_route, dgid => dgid, flow_label => flow_label,
        sgid_index => sgid_index, hop_limit => hop_limit, traffic_class => traffic_class);
    same!(ibv_ah_attr, ibv_ah_attr, grh => grh, dlid => dlid, sl => sl,
        src_path_bits => src_path_bits, static_rate => static_rate, is_global => is_global,
        port_num => port_num);
    same!(ibv_qp_attr, ibv_qp_attr, qp_state => qp_state, cur_qp_state => cur_qp_state,
        path_mtu => path_mtu, path_mig_state => path_mig_state, qkey => qkey, rq_psn => rq_psn,
        sq_psn => sq_psn, dest_qp_num => dest_qp_num, qp_access_flags => qp_access_flags,
        cap => cap, ah_attr => ah_attr, alt_ah_attr => alt_ah_attr, pkey_index => pkey_index,
        alt_pkey_index => alt_pkey_index, en_sqd_async_notify => en_sqd_async_notify,
        sq_draining => sq_draining, max_rd_atomic => max_rd_atomic,
        max_dest_rd_atomic => max_dest_rd_atomic, min_rnr_timer => min_rnr_timer,
        port_num => port_num, timeout => timeout, retry_cnt => retry_cnt,
        rnr_retry => rnr_retry, alt_port_num => alt_port_num, alt_timeout => alt_timeout,
        rate_limit => rate_limit);
    same!(ibv_qp, ibv_qp, context => context, qp_context => qp_context, pd => pd,
        send_cq => send_cq, recv_cq => recv_cq, srq => srq, handle => handle,
        qp_num => qp_num, state => state, qp_type => qp_type, mutex => mutex, cond => cond,
        events_completed => events_completed);
    same!(ibv_sge, ibv_sge, addr => addr, length => length, lkey => lkey);
    same!(imm_or_rkey, imm_data_invalidated_rkey_union_t, imm_data => imm_data,
        invalidated_rkey => invalidated_rkey);
    same!(wr_rdma, rdma_t, remote_addr => remote_addr, rkey => rkey);
    same!(wr_atomic, atomic_t, remote_addr => remote_addr, compare_add => compare_add,
        swap => swap, rkey => rkey);
    same!(wr_ud, ud_t, ah => ah, remote_qpn => remote_qpn, remote_qkey => remote_qkey);
    same!(wr_union, wr_t, rdma => rdma, atomic => atomic, ud => ud);
    same!(qp_type_union, qp_type_t, remote_srqn => xrc);
    same!(wr_bind_mw, bind_mw_t, mw => mw, rkey => rkey, bind_info => bind_info);
    same!(wr_tso, tso_t, hdr => hdr, hdr_sz => hdr_sz, mss => mss);
    same!(bind_mw_or_tso, bind_mw_tso_union_t, bind_mw => bind_mw, tso => tso);
    same!(ibv_send_wr, ibv_send_wr, wr_id => wr_id, next => next, sg_list => sg_list,
        num_sge => num_sge, opcode => opcode, send_flags => send_flags,
        imm => imm_data_invalidated_rkey_union, wr => wr, qp_type => qp_type,
        bind => bind_mw_tso_union);
    same!(ibv_recv_wr, ibv_recv_wr, wr_id => wr_id, next => next, sg_list => sg_list,
        num_sge => num_sge);
    same!(ibv_wc, ibv_wc, wr_id => wr_id, status => status, opcode => opcode,
        vendor_err => vendor_err, byte_len => byte_len, imm => imm_data_invalidated_rkey_union,
        qp_num => qp_num, src_qp => src_qp, wc_flags => wc_flags, pkey_index => pkey_index,
        slid => slid, sl => sl, dlid_path_bits => dlid_path_bits);
    same!(async_element, ibv_async_event_element_t, cq => cq, qp => qp, srq => srq, wq => wq,
        port_num => port_num);
    same!(ibv_async_event, ibv_async_event, element => element, event_type => event_type);
}

#[test]
fn constants_match_rdma_core() {
    use sys::ibv_qp_attr_mask as M;
    let masks = [
        (abi::IBV_QP_STATE, M::IBV_QP_STATE),
        (abi::IBV_QP_CUR_STATE, M::IBV_QP_CUR_STATE),
        (
            abi::IBV_QP_EN_SQD_ASYNC_NOTIFY,
            M::IBV_QP_EN_SQD_ASYNC_NOTIFY,
        ),
        (abi::IBV_QP_ACCESS_FLAGS, M::IBV_QP_ACCESS_FLAGS),
        (abi::IBV_QP_PKEY_INDEX, M::IBV_QP_PKEY_INDEX),
        (abi::IBV_QP_PORT, M::IBV_QP_PORT),
        (abi::IBV_QP_QKEY, M::IBV_QP_QKEY),
        (abi::IBV_QP_AV, M::IBV_QP_AV),
        (abi::IBV_QP_PATH_MTU, M::IBV_QP_PATH_MTU),
        (abi::IBV_QP_TIMEOUT, M::IBV_QP_TIMEOUT),
        (abi::IBV_QP_RETRY_CNT, M::IBV_QP_RETRY_CNT),
        (abi::IBV_QP_RNR_RETRY, M::IBV_QP_RNR_RETRY),
        (abi::IBV_QP_RQ_PSN, M::IBV_QP_RQ_PSN),
        (abi::IBV_QP_MAX_QP_RD_ATOMIC, M::IBV_QP_MAX_QP_RD_ATOMIC),
        (abi::IBV_QP_ALT_PATH, M::IBV_QP_ALT_PATH),
        (abi::IBV_QP_MIN_RNR_TIMER, M::IBV_QP_MIN_RNR_TIMER),
        (abi::IBV_QP_SQ_PSN, M::IBV_QP_SQ_PSN),
        (abi::IBV_QP_MAX_DEST_RD_ATOMIC, M::IBV_QP_MAX_DEST_RD_ATOMIC),
        (abi::IBV_QP_PATH_MIG_STATE, M::IBV_QP_PATH_MIG_STATE),
        (abi::IBV_QP_CAP, M::IBV_QP_CAP),
        (abi::IBV_QP_DEST_QPN, M::IBV_QP_DEST_QPN),
        (abi::IBV_QP_RATE_LIMIT, M::IBV_QP_RATE_LIMIT),
    ];
    for (ours, theirs) in masks {
        assert_eq!(ours as u32, theirs.0);
    }
    use sys::ibv_wr_opcode as W;
    assert_eq!(abi::IBV_WR_RDMA_WRITE, W::IBV_WR_RDMA_WRITE);
    assert_eq!(
        abi::IBV_WR_RDMA_WRITE_WITH_IMM,
        W::IBV_WR_RDMA_WRITE_WITH_IMM
    );
    assert_eq!(abi::IBV_WR_SEND, W::IBV_WR_SEND);
    assert_eq!(abi::IBV_WR_SEND_WITH_IMM, W::IBV_WR_SEND_WITH_IMM);
    assert_eq!(abi::IBV_WR_RDMA_READ, W::IBV_WR_RDMA_READ);
    assert_eq!(abi::IBV_WR_LOCAL_INV, W::IBV_WR_LOCAL_INV);
    assert_eq!(abi::IBV_WR_BIND_MW, W::IBV_WR_BIND_MW);
    assert_eq!(
        abi::IBV_SEND_SIGNALED,
        sys::ibv_send_flags::IBV_SEND_SIGNALED.0
    );
    assert_eq!(abi::IBV_WC_WITH_IMM, sys::ibv_wc_flags::IBV_WC_WITH_IMM.0);
    assert_eq!(abi::IBV_QPT_RC, sys::ibv_qp_type::IBV_QPT_RC);
    assert_eq!(abi::IBV_MW_TYPE_2, sys::ibv_mw_type::IBV_MW_TYPE_2);
    assert_eq!(abi::IBV_PORT_ACTIVE, sys::ibv_port_state::IBV_PORT_ACTIVE);
    assert_eq!(abi::IBV_PORT_DOWN, sys::ibv_port_state::IBV_PORT_DOWN);
    assert_eq!(
        abi::IBV_GID_TYPE_SYSFS_ROCE_V2,
        sys::IBV_GID_TYPE_SYSFS_ROCE_V2
    );
    use sys::ibv_device_cap_flags as D;
    assert_eq!(abi::IBV_DEVICE_MEM_WINDOW, D::IBV_DEVICE_MEM_WINDOW.0);
    assert_eq!(
        abi::IBV_DEVICE_MEM_WINDOW_TYPE_2B,
        D::IBV_DEVICE_MEM_WINDOW_TYPE_2B.0
    );
    assert_eq!(
        abi::IBV_DEVICE_RC_RNR_NAK_GEN,
        D::IBV_DEVICE_RC_RNR_NAK_GEN.0
    );
    assert_eq!(
        abi::IBV_EVENT_QP_FATAL,
        sys::ibv_event_type::IBV_EVENT_QP_FATAL as u32
    );
    assert_eq!(
        abi::IBV_EVENT_CQ_ERR,
        sys::ibv_event_type::IBV_EVENT_CQ_ERR as u32
    );
    assert_eq!(abi::IBV_NODE_CA, sys::ibv_node_type::IBV_NODE_CA);
    assert_eq!(
        abi::IBV_TRANSPORT_IB,
        sys::ibv_transport_type::IBV_TRANSPORT_IB
    );
}
