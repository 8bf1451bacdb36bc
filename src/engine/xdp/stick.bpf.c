// SPDX-License-Identifier: (MIT OR Apache-2.0)
/* The lab's router-on-a-stick DUT (src/engine/xdp/stick.rs, `linerate lab
 * --dut stick`): one trunk link, two VLANs, routed in XDP because this
 * kernel may have no 802.1Q driver to give the stack VLAN devices.
 *
 * A frame to the DUT's MAC with one 802.1Q tag of VLAN A carrying IPv4 or
 * IPv6 leaves again by XDP_TX with VLAN B's id (priority bits kept), the
 * MAC of VLAN B's host as destination, the DUT's as source, and its TTL or
 * hop limit one lower (the IPv4 header checksum updated incrementally);
 * VLAN B to A the same way. A TTL or hop limit <= 1, or an IP header cut
 * short, is dropped and counted in its direction (a router would also send
 * ICMP time exceeded; this one only drops). Everything else (another MAC,
 * untagged, another VLAN, QinQ, ARP) is passed to the stack, counted as
 * passed: without a VLAN device there the stack drops what is tagged. */
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>
#include "linerate.h"

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct lr_stick_config);
} lr_stick_config SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, LR_STICK_SLOTS);
	__type(key, __u32);
	__type(value, __u64);
} lr_stick_counts SEC(".maps");

static __always_inline int count(__u32 slot, int verdict)
{
	__u64 *n = bpf_map_lookup_elem(&lr_stick_counts, &slot);
	if (n)
		*n += 1;
	return verdict;
}

static __always_inline int mac_eq(const __u8 *a, const __u8 *b)
{
	return ((a[0] ^ b[0]) | (a[1] ^ b[1]) | (a[2] ^ b[2]) | (a[3] ^ b[3]) |
		(a[4] ^ b[4]) | (a[5] ^ b[5])) == 0;
}

static __always_inline void mac_set(__u8 *to, const __u8 *from)
{
	for (int i = 0; i < 6; i++)
		to[i] = from[i];
}

SEC("xdp")
int lr_stick(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *end = (void *)(long)ctx->data_end;
	__u32 key = 0;
	struct lr_stick_config *cfg = bpf_map_lookup_elem(&lr_stick_config, &key);
	if (!cfg)
		return XDP_PASS;
	/* MACs (12), TPID (2), TCI (2), inner EtherType (2). */
	__u8 *eth = data;
	if ((void *)(eth + 18) > end)
		return count(LR_STICK_PASSED, XDP_PASS);
	if (!mac_eq(eth, cfg->dut_mac))
		return count(LR_STICK_PASSED, XDP_PASS);
	__u16 *tag = (__u16 *)(eth + 12);
	if (tag[0] != bpf_htons(ETH_P_8021Q))
		return count(LR_STICK_PASSED, XDP_PASS);
	__u16 tci = bpf_ntohs(tag[1]);
	__u16 id = tci & 0x0fff;
	__u16 out_id;
	__u8 *out_mac;
	__u32 fwd, drop;
	if (id == cfg->vlan_a) {
		out_id = cfg->vlan_b;
		out_mac = cfg->mac_b;
		fwd = LR_STICK_A_TO_B;
		drop = LR_STICK_A_TO_B_DROP;
	} else if (id == cfg->vlan_b) {
		out_id = cfg->vlan_a;
		out_mac = cfg->mac_a;
		fwd = LR_STICK_B_TO_A;
		drop = LR_STICK_B_TO_A_DROP;
	} else {
		return count(LR_STICK_PASSED, XDP_PASS);
	}
	__u16 inner = tag[2];
	__u8 *ip = eth + 18;
	if (inner == bpf_htons(ETH_P_IP)) {
		if ((void *)(ip + 20) > end || (ip[0] >> 4) != 4 || (ip[0] & 0x0f) < 5)
			return count(drop, XDP_DROP);
		if (ip[8] <= 1)
			return count(drop, XDP_DROP);
		/* RFC 1624: TTL is the high byte of the 16-bit word it shares
		 * with the protocol; one less there is 0x0100 more in the
		 * one's-complement checksum, with the end-around carry. */
		__u16 *check = (__u16 *)(ip + 10);
		__u32 c = *check;
		c += bpf_htons(0x0100);
		*check = (__u16)(c + (c >= 0xffff));
		ip[8] -= 1;
	} else if (inner == bpf_htons(ETH_P_IPV6)) {
		if ((void *)(ip + 40) > end || (ip[0] >> 4) != 6)
			return count(drop, XDP_DROP);
		if (ip[7] <= 1)
			return count(drop, XDP_DROP);
		ip[7] -= 1;
	} else {
		return count(LR_STICK_PASSED, XDP_PASS);
	}
	tag[1] = bpf_htons((tci & 0xf000) | (out_id & 0x0fff));
	mac_set(eth, out_mac);
	mac_set(eth + 6, cfg->dut_mac);
	return count(fwd, XDP_TX);
}

char LICENSE[] SEC("license") = "Dual MIT/GPL";
