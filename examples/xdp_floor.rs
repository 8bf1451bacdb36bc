//! The floor of the live engine, for bench/run.sh: BPF_PROG_RUN in
//! live-frames mode with a program that only returns XDP_TX (floor.bpf.c)
//! on one constant 64 B frame, back to back, on one interface, from the
//! calling thread. Not a linerate command: it measures the kernel's path
//! that the live engine's per-frame work is compared against.
//!
//! Usage: xdp_floor IFNAME SECONDS [REPEAT] [CPU] [floor|gen]
//! Prints one line: frames sent, seconds, frames/s, ns per call. `gen`
//! runs the live engine's generator (gen.bpf.c, one flow 198.18.0.1 ->
//! 198.18.0.2, broadcast MAC) the same way, without linerate's pacing
//! loop: the per-frame cost of the program alone.

use linerate::engine::frame::{FlowPath, Template};
use linerate::engine::xdp::live::Generator;
use linerate::engine::xdp::{consts, hold_in_dispatcher, with_meta, Object};
use linerate::sys::{self, XdpRun};
use std::time::{Duration, Instant};

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let (Some(ifname), Some(secs)) = (args.get(1), args.get(2)) else {
        anyhow::bail!("usage: xdp_floor IFNAME SECONDS [REPEAT] [CPU]");
    };
    let secs: f64 = secs.parse()?;
    let repeat: u32 = args.get(3).map(|s| s.parse()).transpose()?.unwrap_or(4096);
    if let Some(cpu) = args.get(4) {
        sys::pin_thread(&[cpu.parse()?])?;
    }
    let ifindex: u32 = std::fs::read_to_string(format!("/sys/class/net/{ifname}/ifindex"))
        .map_err(|e| anyhow::anyhow!("{ifname}: {e}"))?
        .trim()
        .parse()?;
    let mut frame = [0x78u8; 60];
    // Broadcast, a local experimental ethertype: counted by the peer's
    // interface, answered by nothing.
    frame[0..6].fill(0xff);
    frame[6..12].copy_from_slice(&[2, 0x4c, 0x52, 0, 0, 1]);
    frame[12..14].copy_from_slice(&[0x88, 0xb5]);
    let gen = args.get(5).map(String::as_str) == Some("gen");
    let prog = if gen { "lr_gen" } else { "lr_floor" };
    let mut obj = if gen {
        let path = FlowPath {
            src_mac: [2, 0x4c, 0x52, 0, 0, 1],
            dst_mac: [0xff; 6],
            src: "198.18.0.1:40000".parse()?,
            dst: "198.18.0.2:5001".parse()?,
            vlan: None,
            dscp: None,
        };
        let t = [Template::new(&path, 64).map_err(|e| anyhow::anyhow!("{e}"))?];
        Generator::load(&[(0, &t[..])], &[64], ifindex)
            .map_err(|e| anyhow::anyhow!("{e}"))?
            .obj
    } else {
        Object::load("floor", &[]).map_err(|e| anyhow::anyhow!("{e}"))?
    };
    // As the live engine does: lo holds the program in the XDP dispatcher.
    let _hold = hold_in_dispatcher(&mut obj, prog);
    let frame = with_meta(&frame);
    let fd = obj.prog_fd(prog).map_err(|e| anyhow::anyhow!("{e}"))?;
    let start = Instant::now();
    let (mut frames, mut calls) = (0u64, 0u64);
    while start.elapsed() < Duration::from_secs_f64(secs) {
        sys::xdp_test_run(
            fd,
            XdpRun {
                data_in: &frame,
                meta_len: consts::META_LEN as u32,
                data_out: None,
                repeat,
                ingress_ifindex: ifindex,
                flags: sys::BPF_F_TEST_XDP_LIVE_FRAMES,
                batch_size: consts::BATCH as u32,
            },
        )?;
        frames += u64::from(repeat);
        calls += 1;
    }
    let el = start.elapsed().as_secs_f64();
    println!(
        "frames {frames} seconds {el:.3} pps {:.0} ns_per_call {:.0}",
        frames as f64 / el,
        el * 1e9 / calls as f64
    );
    Ok(())
}
