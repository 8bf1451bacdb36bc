/* Constants and map layouts shared by linerate's BPF programs and its Rust
 * side. build.rs turns every `#define LR_<NAME> <number>` line of this file
 * into a Rust `pub const <NAME>: u64` (src/engine/xdp/consts.rs in OUT_DIR),
 * so each number is written once. Keep those lines of the form
 * `#define LR_NAME 123` (decimal or 0x hex, nothing after the number). */
#ifndef LINERATE_H
#define LINERATE_H

/* The linerate payload header (crates/proto/src/frame.rs), big-endian:
 * magic "LR" [0..2], flow u16 [2..4], sequence 48 bit [4..10],
 * TX timestamp ns u64 [10..18]. */
#define LR_MAGIC 0x4c52
#define LR_HEADER_LEN 18

/* Ethernet + two VLAN tags (QinQ) + IPv6 + UDP: the longest header a
 * template carries. Without tags a head is 42 (IPv4) or 62 (IPv6) bytes;
 * each tag adds 4. */
#define LR_HEAD_MAX 70
#define LR_ETH_LEN 14
#define LR_VLAN_TAG 4
#define LR_IPV4_HEAD 42
#define LR_IPV6_HEAD 62

/* Flows one generator instance (one sender thread and egress) serves, and
 * distinct frame sizes per flow (imix has 3; the sequence has 12 slots). */
#define LR_MAX_FLOWS 65536
#define LR_MAX_SIZES 4
#define LR_MAX_SEQUENCE 16

/* Frames per BPF_PROG_RUN batch in live-frames mode (kernel max 256). */
#define LR_BATCH 64

/* Paced and catching up, frames that may leave back to back (struct
 * lr_gen_cursor's catch_gap_ns): half a batch. */
#define LR_CATCH_BURST 32

/* Unpaced, frames per clock reading (struct lr_gen_cursor); divides LR_BATCH. */
#define LR_STAMP_EVERY 8

/* The programs also sit attached (generic XDP) on the namespace's lo, only
 * to keep them in the kernel's XDP dispatcher: without that, each
 * BPF_PROG_RUN with repeat > 1 adds and removes the program and waits for
 * an RCU grace period (~25 ms a call measured on this machine). Runs name
 * the egress as their ingress interface (lr_gen_config.ifindex); frames
 * that arrive anywhere else are real traffic: XDP_PASS.
 * The generator's gate must not rely on bytes in the page: live frames
 * recycles pages without rewriting them, and a forwarding DUT writes in
 * front of the frame (the neighbour cache copies 16-byte aligned hard
 * headers, 2 bytes before the Ethernet header). A tag in the metadata did
 * not survive that: most frames of a run through a routing DUT were
 * passed to the sender's own stack, not sent. */

/* Metadata in front of every frame the live engine runs its programs on
 * ("LRGN", host order): the floor program's gate (bench only, no DUT);
 * the generator's input carries it too, unused. */
#define LR_GEN_META 0x4e47524c
#define LR_META_LEN 4

/* The XDP sink (sink.bpf.c): sequence numbers a flow's bitmap window
 * remembers per CPU (a late frame within it is told from a duplicate;
 * older ones count as reordered, as the socket receiver's 4096 window
 * does beyond it), and log2 latency buckets (bucket i: [2^i, 2^(i+1)) ns,
 * bucket 0 also takes frames stamped "in the future"). */
#define LR_SINK_WINDOW 512
#define LR_SINK_WORDS 8
#define LR_SINK_LAT_BUCKETS 64
/* And one-way latency in hdrhistogram's layout for 2 significant digits
 * (src/model/hdr.rs): values below 2^(SUB_BITS+1) ns exact, each power of
 * two above in 2^SUB_BITS equal sub-buckets (width under 0.8 % of the
 * value), up to HDR_MAX_NS (2^36 - 1 ns, 68.7 s; later frames count
 * there). One per-CPU counter per slot, read once at the job's end. */
#define LR_SINK_HDR_SUB_BITS 7
#define LR_SINK_HDR_SLOTS 3840
#define LR_SINK_HDR_MAX_NS 68719476735
/* Frames counted per DSCP value they arrived with (IPv4 TOS or IPv6
 * traffic class >> 2): one counter per value of six bits. */
#define LR_SINK_DSCP 64

/* The router-on-a-stick DUT (stick.bpf.c): slots of its per-CPU counter
 * array, per direction (A->B: tagged with VLAN A, leaving with VLAN B). */
#define LR_STICK_A_TO_B 0
#define LR_STICK_A_TO_B_DROP 1
#define LR_STICK_B_TO_A 2
#define LR_STICK_B_TO_A_DROP 3
#define LR_STICK_PASSED 4
#define LR_STICK_SLOTS 5

/* BPF_PROG_RUN flag asking for live frames (uapi bpf.h, kernel >= 5.18). */
#define LR_F_TEST_XDP_LIVE_FRAMES 2

#ifdef __BPF__
#include <linux/types.h>

/* One flow's frame of one distinct size: the Ethernet/IP/UDP headers with
 * the IPv4 checksum final and the UDP checksum field zero, and the partial
 * one's-complement sum (pseudo-header + UDP header + fill, not
 * complemented, at most 0xffff) the linerate header's words are added to. */
struct lr_template {
	__u8 head[72];
	__u32 csum_base;
	__u16 head_len;  /* LR_IPV4_HEAD or LR_IPV6_HEAD, + 4 per VLAN tag */
	__u16 frame_len; /* bytes without FCS */
	__u16 flow_id;
	__u16 pad;
};

/* Per-run settings, written by user space before the first run. */
struct lr_gen_config {
	/* Added to bpf_ktime_get_ns() (CLOCK_MONOTONIC) to give the clock the
	 * other engines stamp frames with. */
	__u64 clock_offset;
	__u32 flows;
	__u32 sequence_len;
	/* Frame-sequence slot -> distinct size index (imix's 7:4:1 order). */
	__u8 sequence[LR_MAX_SEQUENCE];
	__u32 sizes;
	/* The interface runs name as their ingress: the egress. */
	__u32 ifindex;
};

/* The sink's settings, written by user space before it is attached. */
struct lr_sink_config {
	/* Added to bpf_ktime_get_ns() to give the clock the senders stamp
	 * with (CLOCK_MONOTONIC on the same host: 0). */
	__u64 clock_offset;
	/* Flow ids counted: 0..flows-1; others are foreign. */
	__u32 flows;
	/* UDP destination ports counted, host order, inclusive. */
	__u16 port_lo;
	__u16 port_hi;
	/* Bytes of VLAN tags the senders put on each frame: counted when the
	 * frame arrives with fewer in it (a tag kept in skb metadata by a veth
	 * peer's tx VLAN offload, or stripped by the NIC, never reaches XDP). */
	__u32 tag_bytes;
	__u32 pad;
};

/* The stick DUT's settings, written by user space before it attaches. */
struct lr_stick_config {
	__u8 dut_mac[6];
	/* The one host on each VLAN: where frames to the other VLAN go. */
	__u8 mac_a[6];
	__u8 mac_b[6];
	/* VLAN ids, host order. */
	__u16 vlan_a;
	__u16 vlan_b;
	__u16 pad;
};

/* One flow's sequence state on one CPU (per-CPU array, key: flow id).
 * User space merges the CPUs as FlowTracker::absorb does. */
struct lr_sink_flow {
	__u64 next;       /* highest sequence seen + 1; 0: none yet */
	__u64 packets;    /* unique frames */
	__u64 bytes;      /* their bytes on the wire with FCS */
	__u64 reordered;  /* late frames that filled a gap */
	__u64 duplicates; /* frames seen before (not in packets/bytes) */
	__u64 window[LR_SINK_WORDS];
};

/* One CPU's totals over every flow, read every few ms (one lookup
 * instead of one per flow). Loss is not here: a flow whose frames reach
 * two CPUs (a veth's NAPI follows its sender's CPU) has two per-CPU
 * `next`s, so only the flows' merged state says what is missing. */
struct lr_sink_totals {
	__u64 packets;
	__u64 bytes;
	__u64 reordered;
	__u64 duplicates;
	/* On the counted ports but no linerate header, or a flow id out of
	 * range: passed to the stack, counted as the socket receiver does. */
	__u64 foreign;
	__u64 latency[LR_SINK_LAT_BUCKETS];
	__u64 dscp[LR_SINK_DSCP];
};

/* Where the generator is in its round-robin over flows and sizes, and
 * the pacing of the current run, written by user space before each run
 * that needs it (live.rs). A paced run's frame slot i (from 0) is due at
 * t0_ns + i * gap_fp / 65536: an invocation before the next slot is due
 * is dropped before it touches the page; one that finds the slot due
 * sends its frame. A sender that stalled (preempted) catches up the slots
 * up to late_ns behind, one frame per catch_gap_ns on average and at
 * most LR_CATCH_BURST back to back (a bounded overspeed, never a burst
 * at the core's speed; 0: no bound), and gives up the slots beyond rather
 * than send them late: they count as `skipped`, never sent. last_ns is
 * the earliest time the next frame may leave by that bound (user space
 * writes 0 before every run). A run fills at most `quota` slots; `sent` and
 * `skipped` count them (user space reads them back).
 * gap_fp 0: unpaced, every invocation sends (still up to `quota`), and
 * the clock is read for every LR_STAMP_EVERY-th frame only: the frames
 * between take that reading (stamp_ns) as their TX timestamp, stamp_left
 * counting how many more may. A batch of LR_BATCH frames leaves together
 * when the kernel flushes it, so a frame's TX time is its batch's flush
 * whatever the clock said while it was written; reading it for every
 * frame took about 15 % of the generator's time (perf, 2-core VM). User
 * space sets stamp_left to 0 before every run, so no frame takes a
 * reading from an earlier run, and LR_STAMP_EVERY divides LR_BATCH, so
 * none takes one from across a flush (where the kernel may reschedule). */
struct lr_gen_cursor {
	__u64 flow;
	__u64 slot;
	__u64 t0_ns;
	__u64 gap_fp;
	__u64 quota;
	__u64 sent;
	__u64 skipped;
	__u64 late_ns;
	__u64 stamp_ns;
	__u64 stamp_left;
	__u64 catch_gap_ns;
	__u64 last_ns;
};
#endif

#endif
