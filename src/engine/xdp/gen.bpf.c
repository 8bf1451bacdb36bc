// SPDX-License-Identifier: (MIT OR Apache-2.0)
/* linerate's frame generator, run by BPF_PROG_RUN in live-frames mode
 * (src/engine/xdp/live.rs): every call writes the next frame of the
 * round-robin over this instance's flows and the frame-size sequence and
 * returns XDP_TX, which the kernel turns into a transmit on the interface
 * given as the run's ingress_ifindex.
 *
 * Live frames recycles its pages, and a forwarding DUT on the same host
 * rewrites MACs, TTL and the IPv4 checksum in place in them, so the whole
 * Ethernet/IP/UDP header is written on every frame from the template map;
 * only the fill after the linerate header (never touched by forwarding) is
 * left as user space wrote it into the run's input frame. */
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>
#include "linerate.h"

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct lr_gen_config);
} lr_config SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct lr_gen_cursor);
} lr_cursor SEC(".maps");

/* Key: flow * sizes + size index. User space sizes the map at load time. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, LR_MAX_FLOWS * LR_MAX_SIZES);
	__type(key, __u32);
	__type(value, struct lr_template);
} lr_templates SEC(".maps");

/* The next sequence number per flow of this instance. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, LR_MAX_FLOWS);
	__type(key, __u32);
	__type(value, __u64);
} lr_seq SEC(".maps");

static __always_inline void copy_words(void *dst, const void *src, int words)
{
	/* 8-byte moves: the kernel allows unaligned packet access where the
	 * CPU does, and byte moves would cost 62 instructions a frame. */
	__u64 *d = dst;
	const __u64 *s = src;
#pragma unroll
	for (int i = 0; i < 8; i++)
		if (i < words)
			d[i] = s[i];
}

SEC("xdp")
int lr_gen(struct xdp_md *ctx)
{
	__u32 zero = 0;
	struct lr_gen_config *cfg = bpf_map_lookup_elem(&lr_config, &zero);
	/* Attached to lo only to stay in the XDP dispatcher (linerate.h): runs
	 * name the egress as their ingress, anything else is real traffic. */
	if (!cfg || ctx->ingress_ifindex != cfg->ifindex)
		return XDP_PASS;
	struct lr_gen_cursor *cur = bpf_map_lookup_elem(&lr_cursor, &zero);
	if (!cur || cfg->flows == 0 || cfg->sequence_len == 0 ||
	    cfg->sequence_len > LR_MAX_SEQUENCE || cfg->sizes == 0)
		return XDP_ABORTED;

	/* Pacing (struct lr_gen_cursor): an invocation that comes before the
	 * next frame is due, or after the run's quota, is dropped at once. */
	__u64 i = cur->sent + cur->skipped;
	if (i >= cur->quota)
		return XDP_DROP;
	__u64 now;
	if (!cur->gap_fp) {
		/* Unpaced: one clock reading serves LR_STAMP_EVERY frames. */
		if (cur->stamp_left) {
			now = cur->stamp_ns;
			cur->stamp_left--;
		} else {
			now = bpf_ktime_get_ns();
			cur->stamp_ns = now;
			cur->stamp_left = LR_STAMP_EVERY - 1;
		}
	} else {
		now = bpf_ktime_get_ns();
		__u64 due = cur->t0_ns + ((i * cur->gap_fp) >> 16);
		if (now < due)
			return XDP_DROP;
		if (now - due > cur->late_ns) {
			/* Stalled: give up the slots beyond late_ns behind (all
			 * of them when that is absurdly long: no shift overflow). */
			__u64 behind = now - due - cur->late_ns;
			__u64 give_up = behind >> 40 ? cur->quota
						     : (behind << 16) / cur->gap_fp;
			if (give_up >= cur->quota - i) {
				cur->skipped = cur->quota - cur->sent;
				return XDP_DROP;
			}
			cur->skipped += give_up;
		}
		/* Catching up: one frame per catch_gap_ns on average, at most
		 * LR_CATCH_BURST at once (GCRA: last_ns is the theoretical time
		 * of the next frame). A batch's frames leave together at its
		 * flush, so a per-frame gap would cap the rate at one frame per
		 * batch. */
		if (cur->catch_gap_ns) {
			if (cur->last_ns > now + LR_CATCH_BURST * cur->catch_gap_ns)
				return XDP_DROP;
			cur->last_ns = (cur->last_ns > now ? cur->last_ns : now) +
				       cur->catch_gap_ns;
		}
	}

	__u32 flow = cur->flow;
	__u32 slot = cur->slot;
	if (flow >= cfg->flows)
		flow = 0;
	if (slot >= cfg->sequence_len)
		slot = 0;
	cur->flow = flow + 1 >= cfg->flows ? 0 : flow + 1;
	cur->slot = slot + 1 >= cfg->sequence_len ? 0 : slot + 1;

	__u32 size = cfg->sequence[slot & (LR_MAX_SEQUENCE - 1)];
	if (size >= cfg->sizes)
		return XDP_ABORTED;
	__u32 key = flow * cfg->sizes + size;
	struct lr_template *t = bpf_map_lookup_elem(&lr_templates, &key);
	__u64 *seqp = bpf_map_lookup_elem(&lr_seq, &flow);
	if (!t || !seqp)
		return XDP_ABORTED;
	__u64 seq = *seqp;
	*seqp = seq + 1;

	int len = (int)(ctx->data_end - ctx->data);
	int delta = (int)t->frame_len - len;
	if (delta != 0 && bpf_xdp_adjust_tail(ctx, delta))
		return XDP_ABORTED;
	void *data = (void *)(long)ctx->data;
	void *end = (void *)(long)ctx->data_end;

	/* The head's length is one of six (IPv4 or IPv6, with 0, 1 or 2
	 * VLAN tags): each case copies a constant length, in words, then a
	 * 4-byte move where 6 bytes are left, then the last 2. */
	__u16 *h;
	switch (t->head_len) {
#define LR_HEAD_CASE(L)                                                      \
	case L:                                                              \
		if (data + (L) + LR_HEADER_LEN > end)                        \
			return XDP_ABORTED;                                  \
		copy_words(data, t->head, (L) / 8);                          \
		if ((L) % 8 == 6)                                            \
			*(__u32 *)(data + (L) - 6) = *(__u32 *)(t->head + (L) - 6); \
		*(__u16 *)(data + (L) - 2) = *(__u16 *)(t->head + (L) - 2);  \
		h = data + (L);                                              \
		break;
	LR_HEAD_CASE(LR_IPV4_HEAD)
	LR_HEAD_CASE(LR_IPV4_HEAD + LR_VLAN_TAG)
	LR_HEAD_CASE(LR_IPV4_HEAD + 2 * LR_VLAN_TAG)
	LR_HEAD_CASE(LR_IPV6_HEAD)
	LR_HEAD_CASE(LR_IPV6_HEAD + LR_VLAN_TAG)
	LR_HEAD_CASE(LR_IPV6_HEAD + 2 * LR_VLAN_TAG)
#undef LR_HEAD_CASE
	default:
		return XDP_ABORTED;
	}

	__u64 ts = now + cfg->clock_offset;
	__u16 w[9] = {
		LR_MAGIC,
		t->flow_id,
		(__u16)(seq >> 32),
		(__u16)(seq >> 16),
		(__u16)seq,
		(__u16)(ts >> 48),
		(__u16)(ts >> 32),
		(__u16)(ts >> 16),
		(__u16)ts,
	};
	__u32 sum = t->csum_base;
#pragma unroll
	for (int i = 0; i < 9; i++) {
		h[i] = bpf_htons(w[i]);
		sum += w[i];
	}
	sum = (sum & 0xffff) + (sum >> 16);
	sum = (sum & 0xffff) + (sum >> 16);
	__u16 csum = ~sum & 0xffff;
	/* 0 means "no checksum" over IPv4 and is invalid over IPv6. */
	if (csum == 0)
		csum = 0xffff;
	h[-1] = bpf_htons(csum);
	cur->sent++;
	return XDP_TX;
}

char LICENSE[] SEC("license") = "Dual MIT/GPL";
