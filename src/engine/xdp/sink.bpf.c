// SPDX-License-Identifier: (MIT OR Apache-2.0)
/* linerate's XDP sink (src/engine/xdp/sink.rs, `--rx-engine xdp`): on the
 * receiving interface, counts linerate frames per flow in per-CPU maps and
 * drops them; everything else goes on to the stack (XDP_PASS).
 *
 * A frame is counted when it is Ethernet (up to two VLAN tags) + IPv4 (no options, not a
 * fragment) or IPv6 (UDP as the first next header), UDP to a port in the
 * configured range, and carries the linerate header (magic "LR") of a flow
 * id below the configured count (and per DSCP value it arrived with). The sequence accounting is the socket
 * receiver's FlowTracker (src/engine/udp.rs) with a window of
 * LR_SINK_WINDOW sequence numbers, per CPU: no atomics, no locks. */
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>
#include "linerate.h"

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct lr_sink_config);
} lr_sink_config SEC(".maps");

/* Key: flow id. User space sizes the map to the job's flows. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, LR_MAX_FLOWS);
	__type(key, __u32);
	__type(value, struct lr_sink_flow);
} lr_sink_flows SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct lr_sink_totals);
} lr_sink_totals SEC(".maps");

/* Key: slot of the HDR layout (linerate.h, src/model/hdr.rs). */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, LR_SINK_HDR_SLOTS);
	__type(key, __u32);
	__type(value, __u64);
} lr_sink_hdr SEC(".maps");

/* floor(log2(v)) for v > 0, 0 for 0: the BPF ISA has no clz. */
static __always_inline __u32 log2_u64(__u64 v)
{
	__u32 r = 0;
	if (v >> 32) { v >>= 32; r += 32; }
	if (v >> 16) { v >>= 16; r += 16; }
	if (v >> 8) { v >>= 8; r += 8; }
	if (v >> 4) { v >>= 4; r += 4; }
	if (v >> 2) { v >>= 2; r += 2; }
	if (v >> 1) r += 1;
	return r;
}

/* hdrhistogram's counts index of ns (unit 1 ns, 2^SUB_BITS sub-buckets
 * per power of two): below 2^(SUB_BITS+1) the value itself; above, the
 * power's offset times 2^SUB_BITS plus the value's top SUB_BITS+1 bits. */
static __always_inline __u32 hdr_slot(__u64 ns)
{
	if (ns > LR_SINK_HDR_MAX_NS)
		ns = LR_SINK_HDR_MAX_NS;
	__u32 b = log2_u64(ns | ((1ULL << (LR_SINK_HDR_SUB_BITS + 1)) - 1)) - LR_SINK_HDR_SUB_BITS;
	return (b << LR_SINK_HDR_SUB_BITS) + (__u32)(ns >> b);
}

/* Clears the window's bits of sequence numbers [from, to), to - from
 * below LR_SINK_WINDOW: at most one partial word at each end. */
static __always_inline void clear_range(struct lr_sink_flow *f, __u64 from, __u64 to)
{
	__u64 p = from;
	for (int i = 0; i < LR_SINK_WORDS + 1; i++) {
		if (p >= to)
			break;
		__u32 w = (p / 64) % LR_SINK_WORDS;
		__u32 b = p % 64;
		__u64 n = 64 - b;
		if (n > to - p)
			n = to - p;
		__u64 mask = n >= 64 ? ~0ULL : ((1ULL << n) - 1) << b;
		f->window[w & (LR_SINK_WORDS - 1)] &= ~mask;
		p += n;
	}
}

/* FlowTracker::on_seq. Returns 1 when the frame is a duplicate. */
static __always_inline int on_seq(struct lr_sink_flow *f, struct lr_sink_totals *t, __u64 s)
{
	__u32 w = (s / 64) % LR_SINK_WORDS;
	__u64 bit = 1ULL << (s % 64);
	w &= LR_SINK_WORDS - 1;
	if (s >= f->next) {
		__u64 gap = s - f->next;
		if (gap >= LR_SINK_WINDOW) {
#pragma unroll
			for (int i = 0; i < LR_SINK_WORDS; i++)
				f->window[i] = 0;
		} else {
			clear_range(f, f->next, s);
		}
		f->window[w] |= bit;
		f->next = s + 1;
		return 0;
	}
	if (f->next - s > LR_SINK_WINDOW) {
		/* Too old to tell a duplicate from a very late frame. */
		f->reordered++;
		t->reordered++;
		return 0;
	}
	if (f->window[w] & bit) {
		f->duplicates++;
		t->duplicates++;
		return 1;
	}
	f->window[w] |= bit;
	f->reordered++;
	t->reordered++;
	return 0;
}

static __always_inline int foreign(struct lr_sink_totals *t)
{
	t->foreign++;
	return XDP_PASS;
}

SEC("xdp")
int lr_sink(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *end = (void *)(long)ctx->data_end;
	__u32 zero = 0;
	struct lr_sink_config *cfg = bpf_map_lookup_elem(&lr_sink_config, &zero);
	struct lr_sink_totals *t = bpf_map_lookup_elem(&lr_sink_totals, &zero);
	if (!cfg || !t)
		return XDP_PASS;

	struct ethhdr *eth = data;
	if ((void *)(eth + 1) > end)
		return XDP_PASS;
	/* Up to two VLAN tags (802.1Q, or QinQ with an 802.1ad or 802.1Q
	 * outer tag) between the MACs and the EtherType: skipped, and their
	 * bytes counted in the frame as the senders count them. A tag the
	 * NIC stripped into metadata is not in the frame (rxvlan offload). */
	__u16 proto = eth->h_proto;
	__u32 l2 = LR_ETH_LEN;
#pragma unroll
	for (int i = 0; i < 2; i++) {
		if (proto != bpf_htons(ETH_P_8021Q) && proto != bpf_htons(ETH_P_8021AD))
			break;
		__u16 *tag = data + l2;
		if ((void *)(tag + 2) > end)
			return XDP_PASS;
		proto = tag[1];
		l2 += 4;
	}
	__u32 l4;
	__u32 ip_len;
	__u32 dscp;
	if (proto == bpf_htons(ETH_P_IP)) {
		__u8 *ip = data + l2;
		if ((void *)(ip + 20) > end)
			return XDP_PASS;
		/* Version 4, no options; UDP; neither MF nor a fragment offset. */
		if (ip[0] != 0x45 || ip[9] != 17 || (*(__u16 *)(ip + 6) & bpf_htons(0x3fff)))
			return XDP_PASS;
		l4 = l2 + 20;
		ip_len = 20;
		dscp = ip[1] >> 2;
	} else if (proto == bpf_htons(ETH_P_IPV6)) {
		__u8 *ip = data + l2;
		if ((void *)(ip + 40) > end)
			return XDP_PASS;
		if ((ip[0] >> 4) != 6 || ip[6] != 17)
			return XDP_PASS;
		l4 = l2 + 40;
		ip_len = 40;
		/* The traffic class spans the low nibble of byte 0 and the
		 * high nibble of byte 1. */
		dscp = (((ip[0] & 0x0f) << 4) | (ip[1] >> 4)) >> 2;
	} else {
		return XDP_PASS;
	}
	__u16 *udp = data + l4;
	if ((void *)(udp + 4) > end)
		return XDP_PASS;
	__u16 port = bpf_ntohs(udp[1]);
	if (port < cfg->port_lo || port > cfg->port_hi)
		return XDP_PASS;
	__u16 *h = (void *)(udp + 4);
	if ((void *)h + LR_HEADER_LEN > end || bpf_ntohs(h[0]) != LR_MAGIC)
		return foreign(t);
	__u32 flow = bpf_ntohs(h[1]);
	if (flow >= cfg->flows)
		return foreign(t);
	struct lr_sink_flow *f = bpf_map_lookup_elem(&lr_sink_flows, &flow);
	if (!f)
		return foreign(t);
	__u64 seq = ((__u64)bpf_ntohs(h[2]) << 32) | ((__u64)bpf_ntohs(h[3]) << 16) |
		    bpf_ntohs(h[4]);
	__u64 sent = ((__u64)bpf_ntohs(h[5]) << 48) | ((__u64)bpf_ntohs(h[6]) << 32) |
		     ((__u64)bpf_ntohs(h[7]) << 16) | bpf_ntohs(h[8]);
	if (on_seq(f, t, seq))
		return XDP_DROP;
	/* Bytes as the socket receiver counts them (frame_of_payload): the
	 * UDP datagram's own length plus IP, Ethernet with its tags and FCS,
	 * so Ethernet padding is not counted. */
	__u32 tags = l2 - LR_ETH_LEN;
	if (tags < cfg->tag_bytes)
		tags = cfg->tag_bytes;
	__u64 bytes = bpf_ntohs(udp[2]) + ip_len + LR_ETH_LEN + tags + 4;
	f->packets++;
	f->bytes += bytes;
	t->packets++;
	t->bytes += bytes;
	__u64 now = bpf_ktime_get_ns() + cfg->clock_offset;
	__u64 owd = now > sent ? now - sent : 0;
	__u32 b = owd ? log2_u64(owd) : 0;
	t->latency[b & (LR_SINK_LAT_BUCKETS - 1)]++;
	__u32 slot = hdr_slot(owd);
	__u64 *n = bpf_map_lookup_elem(&lr_sink_hdr, &slot);
	if (n)
		(*n)++;
	/* clang knows dscp < 64 and drops the mask; 6.1's verifier loses that
	 * bound over a stack spill and refuses the index: keep the mask. */
	asm volatile("" : "+r"(dscp));
	t->dscp[dscp & (LR_SINK_DSCP - 1)]++;
	return XDP_DROP;
}

char LICENSE[] SEC("license") = "Dual MIT/GPL";
