// SPDX-License-Identifier: (MIT OR Apache-2.0)
/* The floor the generator is measured against (bench/run.sh): the same
 * live-frames path with no per-frame work, transmitting the run's input
 * frame unchanged. Its one check is the metadata gate gen.bpf.c has too. */
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include "linerate.h"

SEC("xdp")
int lr_floor(struct xdp_md *ctx)
{
	/* Attached to lo only to stay in the XDP dispatcher (linerate.h). */
	void *meta = (void *)(long)ctx->data_meta;
	if (meta + LR_META_LEN > (void *)(long)ctx->data ||
	    *(__u32 *)meta != LR_GEN_META)
		return XDP_PASS;
	return XDP_TX;
}

char LICENSE[] SEC("license") = "Dual MIT/GPL";

/* Passes everything: attached for a moment to learn whether an interface
 * has native (driver) XDP, without touching its traffic. */
SEC("xdp")
int lr_pass(struct xdp_md *ctx)
{
	return XDP_PASS;
}
