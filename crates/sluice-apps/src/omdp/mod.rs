//! OMDP, the options market-data application of the Vega paper (section V.A.2): feed
//! handlers decode a FAST-encoded OPRA-style feed, decision engines keep every option's book,
//! and a metrics collector breaks the latency of a sample of the messages down by hop.
//!
//! ```text
//!  feed senders (processes outside the job: `sluice feed send`)
//!      | UDP, a multicast group per channel on loopback (or unicast: --set feed=unicast)
//!      v
//!  fh (x channels) --key-by(engine of the underlying)--> de (x engines) --1 in N--> metrics
//!      \--counts--> ingest
//! ```
//!
//! The paper ran 2 feed senders, 20 feed handlers, 8 decision engines and 2 collectors on 32
//! cores. On this project's two cores the default is one sender process (it sleeps between
//! bursts, so a second only adds wake-ups), 2 channels and their 2 handlers, 2 decision
//! engines, and the 2 collectors: the same plies, fan-out and fan-in, with a handler and an
//! engine per core (`--set channels=N`, `--set engines=N` scale it up).
//!
//! `--rate-multiple R` sends R times the February 2008 OPRA rate, 24,000 packets/s in aggregate
//! (`sluice_feed::OPRA_FEB_2008_PACKETS_PER_SEC`), split evenly over the channels. A handler
//! stamps each packet's arrival; the message whose channel sequence number is a multiple of
//! `sample-every` (1,600, as the paper's engines forward 1 message in 1,600) is stamped at
//! each operator's exit and entry and reaches the metrics collector, which reports FH, To DE,
//! DE, To MC and end to end over the middle two thirds of the first `samples` (150,000, as
//! the paper) samples. The messages missed are counted against what the feed sender says it
//! sent on each channel (its `--json` report, read when it ends), less what that channel's
//! handler received, so that messages dropped after a channel's last packet received count
//! too; only when the sender said nothing are they the gaps in the channels' sequence numbers
//! the ingest collector saw. Above 0.01% missed, as in the paper, the rate is not sustained.
//! The job's input is the sender's feed: once the sender ended (its duration, or the end of a
//! replayed recording), the handlers take what is still on its way and the job stops.
//!
//! With `--set feed=recording` (and `--set replay=FILE`) no sender runs: each handler reads
//! its channel's packets of the recording itself, at the rate asked, stamping each as sent
//! when it reads it, and the job ends with the recording. That feed replays, so the job can
//! take checkpoints (`--checkpoint-every`): a handler keeps its place in the file, the
//! engines their books, the collectors their samples and counts. The live feeds (a socket or
//! a ring) refuse checkpoints, naming the handlers.

mod collector;
mod engine;
mod handler;
mod summary;
mod tick;

use std::net::{Ipv4Addr, SocketAddrV4};
use std::path::PathBuf;
use std::sync::{Arc, OnceLock};

use sluice_feed::{FeedConfig, Replay, Router, OPRA_FEB_2008_PACKETS_PER_SEC};
use sluice_graph::{GraphBuilder, Partitioning, Ports};
use sluice_types::hash_of_instance;

pub use collector::{IngestCollector, MetricsCollector, HOPS, PAPER_SAMPLES};
pub use engine::DecisionEngine;
pub use handler::{Endpoint, FeedHandler, DEFAULT_RECEIVE_BATCH};
pub use summary::Breakdown;
pub use tick::{IngestTick, Tick};

use crate::{App, AppConfig, AppError, AppSpec, Companion, NamedPlan};

/// The registry entry.
pub const SPEC: AppSpec = AppSpec {
    name: "omdp",
    about: "options market data (Vega paper): FAST feed -> feed handlers -> decision engines -> per-hop latency (--rate-multiple R)",
    settings: &[
        (
            "channels",
            "feed channels, one feed handler each (1 to 24, default 2; a replayed recording has its own)",
        ),
        ("engines", "decision engines (1 to 64, default 2)"),
        (
            "sample-every",
            "one message in this many is timed through to the metrics collector (default 1600)",
        ),
        (
            "samples",
            "latency samples kept; the middle two thirds are reported (default 150000)",
        ),
        ("seed", "seed of the generated feed (default 20080204)"),
        (
            "replay",
            "a feed recorded with `sluice feed record`, sent instead of a generated one",
        ),
        (
            "feed",
            "how the feed senders reach the handlers: multicast (a group per channel on loopback, default), unicast (to 127.0.0.1), shm (a Vega ring per channel, for rates beyond what UDP carries here) or recording (no sender: each handler reads its channel of the `replay` recording itself, paced at the rate, so the job can take checkpoints)",
        ),
        ("group", "the first channel's multicast group (default 239.255.90.1; channel i adds i)"),
        (
            "port",
            "the feed's UDP port (default 31400; every multicast group uses it, unicast channel i adds i; with feed=shm it names the rings, so two jobs need two ports)",
        ),
        (
            "batch",
            "packets a feed handler takes per receive (1 to 1024, default 8): smaller passes messages on sooner, larger saves calls",
        ),
        (
            "socket-buffer",
            "each handler's socket receive buffer in bytes (default 4194304; capped by net.core.rmem_max)",
        ),
        (
            "handler-engines",
            "true: each channel's feed handler is an operator of its own (fh-C) with decision engines of its own (de-C, one instance per group; the same books, as a channel's underlyings are its own), so one thread can carry a handler's messages through its engines; --plan paper-fused sets it (default false)",
        ),
    ],
    build,
    plans: &[
        NamedPlan {
            name: "two-threads",
            about: "the feed handlers on one pinned thread, the engines and collectors on the other",
            toml: TWO_THREADS,
            settings: &[],
        },
        NamedPlan {
            name: "paper-fused",
            about: "the Vega paper's Fused, for 2 channels: a thread per feed handler carrying its messages through decision engines of its own (--set handler-engines=true), the collectors on the first",
            toml: PAPER_FUSED,
            settings: &[("handler-engines", "true")],
        },
        NamedPlan {
            name: "two-processes",
            about: "the feed handlers in one process, the engines and collectors in another, joined by shared memory (the paper's Vega pipelining on two cores)",
            toml: TWO_PROCESSES,
            settings: &[],
        },
    ],
};

const TWO_THREADS: &str = r#"
[[thread]]
name = "handlers"
operators = ["fh"]
core = 0

[[thread]]
name = "engines"
operators = ["de", "metrics", "ingest"]
core = 1
"#;

/// The Vega paper's Fused configuration (section V.C.2: "the single process has 20 threads, one
/// for each feed handler. When a thread sends a tuple to a downstream operator ... it continues
/// until it reaches a sink"), for the default 2 channels: with `handler-engines=true` the
/// handler of channel `c` is the operator `fh-c` and sends only to `de-c`, its own engines (one
/// instance per group), so each thread runs its handler's messages through the engines as
/// function calls. The paper's
/// handler threads shared the engines and the collectors under mutexes; Sluice runs an instance
/// on one thread, so each handler has its own engines (the same books, as a channel's
/// underlyings are its own), and the collectors run on the first thread: the second thread's
/// sampled messages and counts (one message in `sample-every`, a count every 1,024 packets)
/// reach them through a threaded port.
const PAPER_FUSED: &str = r#"
[[thread]]
name = "handler0"
operators = ["fh-0", "de-0", "metrics", "ingest"]
core = 0

[[thread]]
name = "handler1"
operators = ["fh-1", "de-1"]
core = 1
"#;

const TWO_PROCESSES: &str = r#"
[[thread]]
name = "handlers"
pe = "handlers"
operators = ["fh"]
core = 0

[[thread]]
name = "engines"
pe = "engines"
operators = ["de", "metrics", "ingest"]
core = 1
"#;

/// The rate multiple unless `--rate-multiple` says otherwise: what the default feed (UDP
/// multicast on loopback, about 3.7 us of the sender's CPU a packet) carries on two cores with
/// room to spare; the paper's 25x takes `--set feed=shm` here.
pub const DEFAULT_RATE_MULTIPLE: f64 = 5.0;
/// The most channels: OPRA's 24.
pub const MAX_CHANNELS: usize = 24;
/// The most decision engines.
pub const MAX_ENGINES: usize = 64;

/// OMDP's settings, read from the command line.
#[derive(Debug, Clone)]
pub struct OmdpConfig {
    /// The feed's shape (channels, symbols, seed).
    pub feed: FeedConfig,
    /// Decision engines.
    pub engines: usize,
    /// One message in this many is sampled.
    pub sample_every: u64,
    /// Samples kept.
    pub samples: usize,
    /// The rate, as a multiple of the February 2008 OPRA rate.
    pub rate_multiple: f64,
    /// Where each channel arrives.
    pub endpoints: Vec<Endpoint>,
    /// A recorded feed to replay.
    pub replay: Option<PathBuf>,
    /// Each handler's socket receive buffer.
    pub socket_buffer: usize,
    /// Packets per receive.
    pub batch: usize,
    /// Whether each feed handler has decision engines of its own (`handler-engines`).
    pub handler_engines: bool,
}

impl OmdpConfig {
    /// Reads the settings of `config`.
    pub fn from_app(config: &AppConfig) -> Result<Self, AppError> {
        let s = &config.settings;
        let replay: Option<PathBuf> = s
            .get("replay", String::new())
            .map(|p| (!p.is_empty()).then(|| PathBuf::from(p)))?;
        let channels = match &replay {
            // A recording has its own channels: a handler for each.
            Some(file) => Replay::open(file)
                .map_err(|e| AppError::BadSetting {
                    key: "replay".into(),
                    reason: e.to_string(),
                })?
                .channels(),
            None => s.get_in("channels", 2, 1..=MAX_CHANNELS)?,
        };
        if !(1..=MAX_CHANNELS).contains(&channels) {
            return Err(AppError::BadSetting {
                key: "replay".into(),
                reason: format!(
                    "the recording has {channels} channels; OMDP takes 1 to {MAX_CHANNELS}"
                ),
            });
        }
        let engines = s.get_in("engines", 2, 1..=MAX_ENGINES)?;
        let sample_every = s.get_in("sample-every", 1600, 1..=1 << 30)? as u64;
        let samples = s.get_in("samples", PAPER_SAMPLES, 3..=10_000_000)?;
        let socket_buffer = s.get_in("socket-buffer", 4 << 20, 4096..=1 << 30)?;
        let batch = s.get_in("batch", DEFAULT_RECEIVE_BATCH, 1..=1024)?;
        let handler_engines = s.get("handler-engines", false)?;
        let seed: u64 = s.get("seed", FeedConfig::default().seed)?;
        let replay: Option<PathBuf> = s
            .get("replay", String::new())
            .map(|p| (!p.is_empty()).then(|| PathBuf::from(p)))?;
        let rate_multiple = config.rate_multiple.unwrap_or(DEFAULT_RATE_MULTIPLE);
        if !(rate_multiple > 0.0 && rate_multiple <= 10_000.0) {
            return Err(AppError::BadSetting {
                key: "--rate-multiple".into(),
                reason: format!(
                    "{rate_multiple} is out of range: must be above 0 and at most 10000"
                ),
            });
        }
        let group: Ipv4Addr = s.get("group", Ipv4Addr::new(239, 255, 90, 1))?;
        let port = s.get_in("port", 31400, 1..=usize::from(u16::MAX))?;
        if port + channels - 1 > usize::from(u16::MAX) {
            return Err(AppError::BadSetting {
                key: "port".into(),
                reason: format!("{port} + {channels} channels runs past port 65535"),
            });
        }
        // Where channel `c` arrives, by the kind of feed.
        let endpoint: Box<dyn Fn(usize) -> Endpoint> =
            match s.get("feed", "multicast".to_string())?.as_str() {
                "multicast" => {
                    if !group.is_multicast() {
                        return Err(AppError::BadSetting {
                            key: "group".into(),
                            reason: format!("{group} is not a multicast address (224.0.0.0/4)"),
                        });
                    }
                    Box::new(move |c| {
                        let group = Ipv4Addr::from(u32::from(group).wrapping_add(c as u32));
                        Endpoint::Multicast(SocketAddrV4::new(group, port as u16))
                    })
                }
                "unicast" => Box::new(move |c| {
                    Endpoint::Unicast(SocketAddrV4::new(Ipv4Addr::LOCALHOST, (port + c) as u16))
                }),
                "shm" => Box::new(move |c| Endpoint::Shm {
                    feed: format!("omdp{port}"),
                    channel: c,
                }),
                "recording" => {
                    let Some(path) = replay.clone() else {
                        return Err(AppError::BadSetting {
                            key: "feed".into(),
                            reason: "'recording' reads the recording given by --set replay=FILE, \
                                     and none is"
                                .into(),
                        });
                    };
                    let per_channel =
                        rate_multiple * OPRA_FEB_2008_PACKETS_PER_SEC as f64 / channels as f64;
                    let packets_per_sec = (per_channel.round() as u64).max(1);
                    Box::new(move |c| Endpoint::Recording {
                        path: path.clone(),
                        channel: c,
                        packets_per_sec,
                    })
                }
                other => {
                    return Err(AppError::BadSetting {
                        key: "feed".into(),
                        reason: format!("'{other}': expected multicast, unicast, shm or recording"),
                    })
                }
            };
        let endpoints = (0..channels).map(endpoint).collect();
        let feed = FeedConfig {
            channels,
            seed,
            ..FeedConfig::default()
        };
        feed.validate().map_err(|e| AppError::BadSetting {
            key: "channels".into(),
            reason: e.to_string(),
        })?;
        Ok(Self {
            feed,
            engines,
            sample_every,
            samples,
            rate_multiple,
            endpoints,
            replay,
            socket_buffer,
            batch,
            handler_engines,
        })
    }

    /// Packets per second asked of all channels together.
    pub fn packets_per_sec(&self) -> f64 {
        self.rate_multiple * OPRA_FEB_2008_PACKETS_PER_SEC as f64
    }

    /// The feed sender's command line (after the `sluice` binary) for a run of `duration`
    /// seconds.
    fn sender_args(&self, duration: f64) -> Vec<String> {
        let mut args: Vec<String> = vec![
            "feed".into(),
            "send".into(),
            "--rate-multiple".into(),
            self.rate_multiple.to_string(),
            "--duration".into(),
            duration.to_string(),
            // The report, messages sent per channel included, for the missed count.
            "--json".into(),
        ];
        match &self.replay {
            Some(file) => args.extend(["--replay".into(), file.display().to_string()]),
            None => args.extend([
                "--channels".into(),
                self.feed.channels.to_string(),
                "--seed".into(),
                self.feed.seed.to_string(),
            ]),
        }
        match &self.endpoints[0] {
            Endpoint::Shm { feed, .. } => args.extend(["--shm".into(), feed.clone()]),
            Endpoint::Multicast(first) => args.extend([
                "--group".into(),
                first.ip().to_string(),
                "--port".into(),
                first.port().to_string(),
            ]),
            Endpoint::Unicast(_) => {
                let to: Vec<String> = self.endpoints.iter().map(|e| e.to_string()).collect();
                args.extend(["--to".into(), to.join(",")]);
            }
            // The handlers read the recording: no sender runs (see `build`).
            Endpoint::Recording { .. } => {}
        }
        args
    }

    /// Whether the handlers read the recording themselves (`feed=recording`).
    fn reads_recording(&self) -> bool {
        matches!(self.endpoints.first(), Some(Endpoint::Recording { .. }))
    }
}

fn build(config: &AppConfig) -> Result<App, AppError> {
    let omdp = OmdpConfig::from_app(config)?;
    let channels = omdp.feed.channels;
    let engines = omdp.engines;
    let router = Arc::new(Router::new(&omdp.feed, engines));
    let mut g = GraphBuilder::new("omdp");
    let keep = omdp.samples;
    let metrics = g.operator("metrics", Ports::new().input::<Tick>(), move |_| {
        MetricsCollector::new(keep)
    });
    let ingest = g.operator("ingest", Ports::new().input::<IngestTick>(), |_| {
        IngestCollector::default()
    });
    // The handlers and their engines: one `fh` of an instance per channel and one `de` of an
    // instance per group; or, with engines per handler, `fh-c` and its own `de-c` per channel.
    let plies: Vec<(String, String, Option<usize>)> = if omdp.handler_engines {
        (0..channels)
            .map(|c| (format!("fh-{c}"), format!("de-{c}"), Some(c)))
            .collect()
    } else {
        vec![("fh".into(), "de".into(), None)]
    };
    for (fh_name, de_name, channel) in plies {
        let (endpoints, buffer, batch, sample_every) = (
            omdp.endpoints.clone(),
            omdp.socket_buffer,
            omdp.batch,
            omdp.sample_every,
        );
        let fh = g.source(
            &fh_name,
            Ports::new().output::<Tick>().output::<IngestTick>(),
            move |_| {
                let handler = FeedHandler::new(endpoints.clone(), buffer, batch, sample_every);
                match channel {
                    Some(c) => handler.of_channel(c),
                    None => handler,
                }
            },
        );
        g.set_parallelism(fh, if channel.is_some() { 1 } else { channels })?;
        let de = g.operator(
            &de_name,
            Ports::new().input::<Tick>().output::<Tick>(),
            |_| DecisionEngine::default(),
        );
        g.set_parallelism(de, engines)?;
        let router = Arc::clone(&router);
        g.connect_with(
            fh.out(0),
            de.input(0),
            Partitioning::by_hash(move |t: &Tick| {
                hash_of_instance(router.engine_of(t.underlying), engines)
            }),
        )?;
        g.connect(fh.out(1), ingest.input(0))?;
        g.connect(de.out(0), metrics.input(0))?;
    }
    let duration = config.duration.map_or(5.0, |d| d.as_secs_f64());
    let sent = Arc::new(OnceLock::new());
    // A feed read from its recording by the handlers needs no sender: the job ends with it.
    let companions = match omdp.reads_recording() {
        true => Vec::new(),
        false => vec![Companion {
            name: "feed sender".into(),
            args: omdp.sender_args(duration),
            output: Some(Arc::clone(&sent)),
            feeds_the_job: true,
        }],
    };
    let (text, text_sent) = (omdp.clone(), Arc::clone(&sent));
    Ok(App {
        graph: g.build()?,
        summarize: Box::new(move |report| {
            Breakdown::of(report, &text, text_sent.get().map(String::as_str)).to_text()
        }),
        companions,
        json: Some(Box::new(move |report| {
            Breakdown::of(report, &omdp, sent.get().map(String::as_str)).to_json()
        })),
        finite_input: None,
    })
}
