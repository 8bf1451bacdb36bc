// SPDX-License-Identifier: (MIT OR Apache-2.0)
/* Passes every frame to the stack. Attached to a veth only to give it an
 * XDP receive path: on this kernel a frame another veth's program sends
 * by XDP_TX is queued to its peer, but the peer's NAPI is scheduled for
 * it only when the peer has an XDP program (GRO alone leaves the frames
 * in the ring). The stick DUT's bridge port carries it (stick.rs). */
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

SEC("xdp")
int lr_pass(struct xdp_md *ctx)
{
	return XDP_PASS;
}

char LICENSE[] SEC("license") = "Dual MIT/GPL";
