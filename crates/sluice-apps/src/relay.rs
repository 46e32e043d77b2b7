//! The latency test of the IBM Streams report and the Vega paper: a pinger sends timestamped
//! tuples at a fixed rate through a relay and back to a pong sink beside the pinger, which
//! records each tuple's round trip; half of it is the one-way latency of a hop.
//!
//! ```text
//! pinger --forward--> relay --forward--> pong        (pinger and pong share a host)
//! ```
//!
//! `--set apart=true` puts the relay on another host than the pinger (a placement constraint,
//! so it needs `--hosts` with two hosts or more); with `--plan processes` each operator is a
//! process, and the two hops are shared memory on one host or TCP between hosts.

use bytemuck::{Pod, Zeroable};
use sluice_graph::{
    expect_tuple, latency_histogram, GraphBuilder, LatencyHistogram, Operator, OperatorError,
    OperatorReport, Output, Placement, Ports, Produced, Source,
};
use sluice_ops::Pacer;
use sluice_types::{facade_tuple, monotonic_ns, TupleRef};

use crate::{latency_line, throughput_line, App, AppConfig, AppError, AppSpec};

/// The registry entry.
pub const SPEC: AppSpec = AppSpec {
    name: "relay",
    about: "round-trip latency through a relay at a fixed rate (IBM Streams latency test)",
    settings: &[(
        "apart",
        "true: the relay runs on another host than the pinger (needs --hosts; default false)",
    )],
    build,
    plans: &[],
};

/// Tuples per second unless `--rate` says otherwise.
pub const DEFAULT_RATE: u64 = 1000;

/// A timestamped probe, 64 bytes like the papers' small tuples.
#[repr(C)]
#[derive(Debug, Clone, Copy, Pod, Zeroable)]
pub struct Ping {
    /// `monotonic_ns` when the pinger sent it.
    pub sent_ns: u64,
    /// Its sequence number.
    pub seq: u64,
    /// Payload up to 64 bytes.
    pub pad: [u64; 6],
}
facade_tuple!(Ping);

/// Probes per `produce` call at most.
const BURST: usize = 64;

struct Pinger {
    pacer: Pacer,
    seq: u64,
}

impl Source for Pinger {
    fn produce(&mut self, out: &mut Output<'_>) -> Result<Produced, OperatorError> {
        let due = self.pacer.allowance(BURST);
        for _ in 0..due {
            self.seq += 1;
            out.emit(
                0,
                Ping {
                    sent_ns: monotonic_ns(),
                    seq: self.seq,
                    pad: [0; 6],
                },
            )?;
        }
        self.pacer.emitted(due);
        Ok(if due == 0 {
            Produced::Idle
        } else {
            Produced::Emitted(due)
        })
    }
}

struct Relay;

impl Operator for Relay {
    fn process(
        &mut self,
        port: usize,
        tuple: TupleRef<'_>,
        out: &mut Output<'_>,
    ) -> Result<(), OperatorError> {
        out.emit(0, *expect_tuple::<Ping>(port, tuple)?)
    }
}

struct Pong {
    round_trips: LatencyHistogram,
}

impl Operator for Pong {
    fn process(
        &mut self,
        port: usize,
        tuple: TupleRef<'_>,
        _out: &mut Output<'_>,
    ) -> Result<(), OperatorError> {
        let ping = expect_tuple::<Ping>(port, tuple)?;
        self.round_trips
            .saturating_record(monotonic_ns().saturating_sub(ping.sent_ns));
        Ok(())
    }

    fn stop(&mut self) -> Result<OperatorReport, OperatorError> {
        Ok(OperatorReport {
            latency: Some(std::mem::replace(
                &mut self.round_trips,
                latency_histogram(),
            )),
            ..OperatorReport::default()
        })
    }
}

fn build(config: &AppConfig) -> Result<App, AppError> {
    let apart: bool = config.settings.get("apart", false)?;
    let rate = Some(config.rate.unwrap_or(DEFAULT_RATE));
    let mut g = GraphBuilder::new("relay");
    let pinger = g.source("pinger", Ports::new().output::<Ping>(), move |_| Pinger {
        pacer: Pacer::new(rate),
        seq: 0,
    });
    let relay = g.operator(
        "relay",
        Ports::new().input::<Ping>().output::<Ping>(),
        |_| Relay,
    );
    let pong = g.operator("pong", Ports::new().input::<Ping>(), |_| Pong {
        round_trips: latency_histogram(),
    });
    g.connect(pinger.out(0), relay.input(0))?;
    g.connect(relay.out(0), pong.input(0))?;
    g.place(pong, Placement::ColocateWith("pinger".into()))?;
    if apart {
        g.place(relay, Placement::ExlocateFrom("pinger".into()))?;
    }
    Ok(App::new(
        g.build()?,
        Box::new(|report| {
            let latency = report.operator_report("pong").latency;
            format!(
                "{}\nround trip, {}\none way (half the round trip): p50 {:.1} us",
                throughput_line("round trips", report.tuples_in("pong"), report.elapsed),
                latency_line(latency.as_ref()),
                latency
                    .as_ref()
                    .map_or(0.0, |h| h.value_at_quantile(0.5) as f64 / 2000.0)
            )
        }),
    ))
}
