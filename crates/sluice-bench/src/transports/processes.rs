//! Benchmarks across two processes: `--transport shm-vega`, `tcp`, `tcp-batched`,
//! `tcp-adaptive`, `udp-mq` and the baseline of `mpi` (whose own runs are in module `mpi`).
//!
//! The benchmark process is the sender, on core 0; it re-executes its own binary as
//! `sluice bench peer ...` for the receiver, on core 1, which records arrivals like the
//! in-process sink does and prints its figures as one line of JSON when the end of the stream
//! arrives. The same `sluice` binary must therefore be the one running (it is, under
//! `sluice bench`). For shm-vega the sender creates the segment and the receiver opens it;
//! for tcp and udp-mq the receiver binds a port on loopback and announces it on its first
//! line of output (modules `network` and `udp`), and the sender connects with the job's
//! secret, which it hands over in the environment.
//!
//! The baseline for shm-vega is the hardware itself, measured in the same run: a cache-line
//! transfer between cores 0 and 1 for latency, and one core's memcpy of tuples of the same
//! size for throughput. For tcp it is raw TCP on loopback between the same two cores
//! (module `network`), for udp-mq raw UDP, one system call per datagram (module `udp`).
//!
//! `shm-osr` (module `shm_osr`) turns this around, many senders to one receiver, and shares
//! the sending and recording loops (module `endpoints`) and the hardware baseline (module
//! `hardware`).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use anyhow::Context;
use sluice_transport::shm_vega::{create_sender, open_receiver};
use sluice_types::monotonic_ns;

use crate::foundation::args::{Bench, Settings, Transport, TupleEncoding};
use crate::foundation::load::Load;
use crate::foundation::payload::{dispatch, Payload, PayloadVisitor};
use crate::foundation::record::{Counting, Measured, Recorder, RunFigures, Timing};
use crate::transports::endpoints::{
    all_figures, encoded_size, pin, record, segment, send, send_pinned, vega_slots, PeerArgs,
    PeerProcess, PATIENCE,
};
use crate::transports::hardware::hardware_run;
use crate::transports::{mpi, network, reflect, shm_osr, udp};

/// The receiving process: prints its figures as JSON.
pub(crate) fn peer(args: &PeerArgs) -> anyhow::Result<()> {
    let facade = args.encoding == TupleEncoding::Facade;
    if args.reflect {
        return dispatch(facade, args.size, reflect::Reflector(args))?;
    }
    let figures = dispatch(facade, args.size, Receive(args))??;
    println!("{}", serde_json::to_string(&figures)?);
    Ok(())
}

struct Receive<'a>(&'a PeerArgs);

impl PayloadVisitor for Receive<'_> {
    type Output = anyhow::Result<RunFigures>;

    fn visit<P: Payload>(self, size: usize) -> Self::Output {
        if self.0.latency {
            receive::<P, Timing>(self.0, size)
        } else {
            receive::<P, Counting>(self.0, size)
        }
    }
}

fn receive<P: Payload, R: Recorder>(args: &PeerArgs, size: usize) -> anyhow::Result<RunFigures> {
    let _pinned = pin(1);
    let idle = args.idle;
    let mut recorder = R::new(monotonic_ns().saturating_add(args.warmup_ns));
    let mut loss = None;
    if args.transport == Transport::UdpMq {
        if args.baseline {
            loss = Some(udp::raw_receive::<P, R>(
                &mut recorder,
                args.slot_bytes,
                idle,
            )?);
        } else {
            let mut rx = udp::bind::<P>(args.queues, args.slot_bytes)?;
            record(&mut rx, &mut recorder, idle, 1, None)?;
            loss = Some(udp::loss(&rx));
        }
    } else if args.baseline && args.transport == Transport::Mpi {
        // The mpi benchmark's baseline is raw TCP; its own runs are received by a rank.
        network::raw_receive::<P, R>(&mut recorder, args.slot_bytes, idle)?;
    } else if let Some(profile) = args.transport.tcp_profile() {
        if args.baseline {
            network::raw_receive::<P, R>(&mut recorder, args.slot_bytes, idle)?;
        } else {
            let mut rx = network::bind::<P>(profile, args.slot_bytes)?;
            record(&mut rx, &mut recorder, idle, 1, None)?;
        }
    } else {
        let name = segment(&args.job)?;
        let waited = Instant::now();
        let mut rx = loop {
            match open_receiver::<P>(
                &name,
                args.slot_bytes,
                vega_slots(args.slot_bytes, args.ring_bytes),
            ) {
                Ok(rx) => break rx,
                Err(_) if waited.elapsed() < PATIENCE => {
                    std::thread::sleep(Duration::from_millis(1))
                }
                Err(e) => return Err(e).context("open the benchmark's ring"),
            }
        };
        record(&mut rx, &mut recorder, idle, 1, None)?;
    }
    Ok(RunFigures {
        loss,
        ..RunFigures::from_report(&recorder.report(), size)?
    })
}

/// Runs `repeat` cross-process runs, each followed by its baseline.
pub(crate) fn repeat<P: Payload>(
    s: &Settings,
    template: P,
    load: Load,
) -> anyhow::Result<Measured> {
    let mut measured = Measured::new(s.repeat, crate::foundation::machine::cores() >= 2);
    let reflected = match s.bench {
        Bench::Latency { rate } if s.method.reflects() => Some(rate),
        _ => None,
    };
    for i in 1..=s.repeat {
        let (run, baseline) = match s.transport.tcp_profile() {
            _ if let Some(rate) = reflected => (
                reflect::run(s, template.clone(), rate),
                reflect::run_baseline(s, template.clone(), rate),
            ),
            None if s.transport == Transport::UdpMq => (
                udp::run_udp_mq(s, template.clone(), load.clone()),
                udp::run_raw(s, template.clone(), load.clone()),
            ),
            Some(profile) => (
                network::run_tcp(s, template.clone(), load.clone(), profile),
                network::run_raw(s, template.clone(), load.clone()),
            ),
            None if s.transport == Transport::Mpi => (
                mpi::run(s),
                network::run_raw(s, template.clone(), load.clone()),
            ),
            None if s.transport == Transport::ShmOsr => {
                (shm_osr::run_once::<P>(s), Ok(hardware_run(s)))
            }
            None => (
                run_vega(s, template.clone(), load.clone()),
                Ok(hardware_run(s)),
            ),
        };
        let name = s.transport.name();
        measured
            .sluice
            .push(run.with_context(|| format!("{name} run {i}"))?);
        measured.baseline_run(i, baseline);
    }
    Ok(measured)
}

fn run_vega<P: Payload>(s: &Settings, template: P, load: Load) -> anyhow::Result<RunFigures> {
    static RUNS: AtomicUsize = AtomicUsize::new(0);
    let slot_bytes = encoded_size(&template)?;
    let mut txs = Vec::with_capacity(s.receivers);
    let mut peers = Vec::with_capacity(s.receivers);
    for _ in 0..s.receivers {
        let job = format!(
            "bench{}r{}",
            std::process::id(),
            RUNS.fetch_add(1, Ordering::Relaxed)
        );
        txs.push(create_sender::<P>(
            &segment(&job)?,
            slot_bytes,
            vega_slots(slot_bytes, s.ring_bytes),
        )?);
        peers.push(PeerProcess::spawn(s, false, &job, slot_bytes, None)?);
    }
    send_pinned(s, |idle| send(&mut txs, template, load, s.span(), idle, 0))?;
    all_figures(peers, s.size)
}
