//! The registry of connectors by URL scheme: what `--input` and `--output` of the built-in
//! applications take (`in.txt`, `file:///data/in.txt`, `tcp://127.0.0.1:9000`,
//! `udp://127.0.0.1:9001`, `stdout`, `kafka://127.0.0.1:9092/lines`), resolved by
//! [`resolve`] to a [`Connector`] that adds a source of text lines to a
//! [`Dataflow`](sluice_ops::Dataflow) or ends a stream of lines in a sink.
//!
//! Adding a connector is its module and one line of [`CONNECTORS`]; the conformance suite
//! (`tests/conformance.rs`) runs over this list, so a connector listed here cannot skip it.
//! Lines are the registry's common tuple: every application can read and write them, and a
//! connector's typed API (its module) offers more.

use std::net::SocketAddr;
use std::path::PathBuf;

use sluice_ops::{Dataflow, Sink, Stream};
use thiserror::Error;

use crate::fluent::{FlowIo, StreamIo};
use crate::format::Lines;
use crate::kafka::{Delivery, EndAt, KafkaRecord, KafkaSinkConfig, KafkaSourceConfig};
use crate::net::TcpEndpoint;
use crate::stream_sink::{ByteTarget, StreamSink};
use crate::udp::{UdpSink, UdpSource};

/// Why an address names no connector, or not one that can be used as asked.
#[derive(Debug, Error, PartialEq, Eq)]
pub enum AddressError {
    /// The scheme is not in the registry.
    #[error("{address}: no connector for the scheme {scheme}:// (known: {known})")]
    UnknownScheme {
        /// The address as given.
        address: String,
        /// Its scheme.
        scheme: String,
        /// The registry's schemes.
        known: String,
    },
    /// The connector cannot be used in this direction (`stdout` as an input).
    #[error("{address}: the {scheme} connector cannot be an {direction}")]
    Direction {
        /// The address as given.
        address: String,
        /// The connector's scheme.
        scheme: &'static str,
        /// `input` or `output`.
        direction: &'static str,
    },
    /// The rest of the address is not what the connector takes.
    #[error("{address}: {expected}")]
    Malformed {
        /// The address as given.
        address: String,
        /// The form the connector takes.
        expected: &'static str,
    },
}

/// Where a URL points: the part after `SCHEME://` (a path for a bare file name), with the
/// client settings given for the connector (`--set kafka.KEY=VALUE` as `(KEY, VALUE)`).
#[derive(Debug, Clone)]
pub struct Target<'a> {
    /// The whole address, for errors.
    pub address: &'a str,
    /// The part after the scheme.
    pub rest: &'a str,
    /// The connector's client settings.
    pub settings: &'a [(String, String)],
}

/// A source of lines a connector adds under `name`.
pub type LinesSource = fn(&Dataflow, &str, &Target<'_>) -> Result<Stream<String>, AddressError>;
/// A sink of lines a connector adds under `name`.
pub type LinesSink = fn(&Stream<String>, &str, &Target<'_>) -> Result<Sink, AddressError>;

/// One connector of the registry.
#[derive(Debug, Clone, Copy)]
pub struct Connector {
    /// Its URL scheme (`file` also takes a bare path).
    pub scheme: &'static str,
    /// What the address after the scheme is, for help and errors.
    pub form: &'static str,
    /// Its source of lines, if it reads.
    pub source: Option<LinesSource>,
    /// Its sink of lines, if it writes.
    pub sink: Option<LinesSink>,
    /// Its sink of lines that publishes only what completed checkpoints hold (two-phase
    /// commit), if it has one: the conformance suite holds it to a pre-commit at each
    /// barrier, a publication at each checkpoint's completion, and a recovery that publishes
    /// what its checkpoint held and drops what was written after it.
    pub exactly_once_sink: Option<LinesSink>,
    /// What its source promises: an end of input of its own, a position kept through
    /// checkpoints and suspensions. The conformance suite holds it to them.
    pub promises: Promises,
}

/// What a connector's source promises (see [`Connector::promises`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Promises {
    /// The source ends when its input does (a file, a connection that closes, a bounded
    /// topic read), so the job ends by itself.
    pub ends: bool,
    /// The source keeps its position in snapshots: restored, it emits what followed.
    pub resumes: bool,
}

/// Every connector reachable by an address. One line each.
pub const CONNECTORS: &[Connector] = &[
    Connector {
        scheme: "file",
        form: "a path, or file://PATH",
        source: Some(|flow, name, t| Ok(flow.read_text(name, t.rest))),
        sink: Some(file_lines_sink),
        // Under checkpoints a file sink publishes its parts as they complete
        // (`staged_output`).
        exactly_once_sink: Some(file_lines_sink),
        promises: Promises {
            ends: true,
            resumes: true,
        },
    },
    Connector {
        scheme: "tcp",
        form: "tcp://HOST:PORT (connects to it)",
        source: Some(|flow, name, t| Ok(flow.read_tcp(name, TcpEndpoint::connect(socket(t)?)))),
        sink: Some(|stream, name, t| Ok(stream.write_tcp(name, TcpEndpoint::connect(socket(t)?)))),
        exactly_once_sink: None,
        promises: Promises {
            ends: true,
            resumes: false,
        },
    },
    Connector {
        scheme: "udp",
        form: "udp://HOST:PORT (receives on it, or sends to it; a line a datagram)",
        source: Some(|flow, name, t| {
            let address = socket(t)?;
            Ok(flow.source(name, move |_| UdpSource::<String>::new(address)))
        }),
        sink: Some(|stream, name, t| {
            let address = socket(t)?;
            Ok(stream.sink(name, move |_| UdpSink::<String>::new(address)))
        }),
        exactly_once_sink: None,
        promises: Promises {
            ends: false,
            resumes: false,
        },
    },
    Connector {
        scheme: "stdout",
        form: "stdout (standard output; nothing after the scheme)",
        source: None,
        sink: Some(|stream, name, _| {
            Ok(stream.sink(name, |_| StreamSink::<String, _>::lines(ByteTarget::Stdout)))
        }),
        exactly_once_sink: None,
        promises: Promises {
            ends: false,
            resumes: false,
        },
    },
    Connector {
        scheme: "kafka",
        form: "kafka://HOST:PORT[,HOST:PORT...]/TOPIC",
        source: Some(kafka_lines_source),
        sink: Some(|lines, name, t| kafka_lines_sink(lines, name, kafka_sink_config(t)?)),
        exactly_once_sink: Some(|lines, name, t| {
            let mut config = kafka_sink_config(t)?;
            config.delivery = Delivery::ExactlyOnce {
                transactional_id: format!("sluice-{name}-{}", config.topic),
            };
            kafka_lines_sink(lines, name, config)
        }),
        promises: Promises {
            ends: true,
            resumes: true,
        },
    },
];

/// The connector `address` names and its target: `SCHEME://REST`, `stdout`, or a path (the
/// file connector).
pub fn resolve<'a>(
    address: &'a str,
    settings: &'a [(String, String)],
) -> Result<(&'static Connector, Target<'a>), AddressError> {
    let (scheme, rest) = match address.split_once("://") {
        Some((scheme, rest)) => (scheme, rest),
        None if address == "stdout" => ("stdout", ""),
        None => ("file", address),
    };
    let connector = CONNECTORS
        .iter()
        .find(|c| c.scheme == scheme)
        .ok_or_else(|| AddressError::UnknownScheme {
            address: address.to_owned(),
            scheme: scheme.to_owned(),
            known: CONNECTORS
                .iter()
                .map(|c| c.scheme)
                .collect::<Vec<_>>()
                .join(", "),
        })?;
    let target = Target {
        address,
        rest,
        settings,
    };
    Ok((connector, target))
}

impl Connector {
    /// Adds this connector's source of lines under `name`, reading `target`.
    pub fn read_lines(
        &self,
        flow: &Dataflow,
        name: &str,
        target: &Target<'_>,
    ) -> Result<Stream<String>, AddressError> {
        let source = self.source.ok_or_else(|| self.direction(target, "input"))?;
        source(flow, name, target)
    }

    /// Ends `lines` in this connector's sink under `name`, writing to `target`.
    pub fn write_lines(
        &self,
        lines: &Stream<String>,
        name: &str,
        target: &Target<'_>,
    ) -> Result<Sink, AddressError> {
        let sink = self.sink.ok_or_else(|| self.direction(target, "output"))?;
        sink(lines, name, target)
    }

    /// Whether `target` is a file path (the file connector), which callers may check
    /// before the job starts.
    pub fn file_path(&self, target: &Target<'_>) -> Option<PathBuf> {
        (self.scheme == "file").then(|| PathBuf::from(target.rest))
    }

    fn direction(&self, target: &Target<'_>, direction: &'static str) -> AddressError {
        AddressError::Direction {
            address: target.address.to_owned(),
            scheme: self.scheme,
            direction,
        }
    }
}

/// `HOST:PORT` of a socket connector's target.
fn socket(target: &Target<'_>) -> Result<SocketAddr, AddressError> {
    target.rest.parse().map_err(|_| AddressError::Malformed {
        address: target.address.to_owned(),
        expected: "a socket address is IP:PORT (127.0.0.1:9000, [::1]:9000)",
    })
}

/// The brokers and the topic of a `kafka://` target.
fn kafka_topic<'a>(target: &Target<'a>) -> Result<(&'a str, &'a str), AddressError> {
    match target.rest.split_once('/') {
        Some((brokers, topic))
            if !brokers.is_empty() && !topic.is_empty() && !topic.contains('/') =>
        {
            Ok((brokers, topic))
        }
        _ => Err(AddressError::Malformed {
            address: target.address.to_owned(),
            expected: "a Kafka topic is named kafka://HOST:PORT/TOPIC",
        }),
    }
}

/// How the registry reads a `kafka://` target: from the earliest record up to the end
/// offsets the topic had when the job started (a bounded read, as of a file), with the
/// target's client settings. For an application that reads the records typed rather than
/// as lines.
pub fn kafka_source_config(target: &Target<'_>) -> Result<KafkaSourceConfig, AddressError> {
    let (brokers, topic) = kafka_topic(target)?;
    let mut config = KafkaSourceConfig::new(brokers, topic);
    config.end = EndAt::EndOffsetsAtStart;
    config.settings = target.settings.to_vec();
    Ok(config)
}

/// How the registry writes a `kafka://` target: at least once, with the target's client
/// settings.
pub fn kafka_sink_config(target: &Target<'_>) -> Result<KafkaSinkConfig, AddressError> {
    let (brokers, topic) = kafka_topic(target)?;
    let mut config = KafkaSinkConfig::new(brokers, topic, Delivery::AtLeastOnce);
    config.settings = target.settings.to_vec();
    Ok(config)
}

/// A topic's records as UTF-8 lines ([`kafka_source_config`]).
fn kafka_lines_source(
    flow: &Dataflow,
    name: &str,
    target: &Target<'_>,
) -> Result<Stream<String>, AddressError> {
    let records = flow.read_kafka(name, kafka_source_config(target)?, Lines);
    Ok(
        records.map(&format!("{name}-value"), |record: &KafkaRecord<String>| {
            record.value.clone()
        }),
    )
}

/// Lines written to a topic as `config` says ([`kafka_sink_config`], or exactly once with
/// transactional ids named after the sink and the topic); a line `KEY<TAB>REST` is keyed
/// (and so partitioned) by `KEY`, so that a reader keeps each key's records in order.
fn kafka_lines_sink(
    lines: &Stream<String>,
    name: &str,
    config: KafkaSinkConfig,
) -> Result<Sink, AddressError> {
    Ok(lines.write_kafka(name, config, Lines, |line: &String| {
        line.split_once('\t')
            .map(|(key, _)| key.as_bytes().to_vec())
    }))
}

/// Lines written to the file at the target's path (two-phase under checkpoints).
fn file_lines_sink(
    lines: &Stream<String>,
    name: &str,
    target: &Target<'_>,
) -> Result<Sink, AddressError> {
    Ok(lines.write_text(name, target.rest))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bare_path_and_file_urls_are_the_file_connector() {
        for (address, path) in [
            ("in.txt", "in.txt"),
            ("file:///data/in.txt", "/data/in.txt"),
        ] {
            let (connector, target) = resolve(address, &[]).unwrap();
            assert_eq!(connector.scheme, "file");
            assert_eq!(connector.file_path(&target), Some(PathBuf::from(path)));
        }
    }

    #[test]
    fn an_unknown_scheme_names_the_known_ones() {
        let error = resolve("ftp://host/file", &[]).unwrap_err().to_string();
        assert_eq!(
            error,
            "ftp://host/file: no connector for the scheme ftp:// (known: file, tcp, udp, stdout, kafka)"
        );
    }

    #[test]
    fn a_connector_refuses_the_direction_it_lacks_and_a_malformed_target() {
        let flow = Dataflow::new("refused");
        let (stdout, target) = resolve("stdout", &[]).unwrap();
        let error = stdout.read_lines(&flow, "in", &target).err().unwrap();
        assert_eq!(
            error.to_string(),
            "stdout: the stdout connector cannot be an input"
        );
        let (tcp, target) = resolve("tcp://localhost", &[]).unwrap();
        let error = tcp.read_lines(&flow, "in", &target).err().unwrap();
        assert!(error
            .to_string()
            .starts_with("tcp://localhost: a socket address is IP:PORT"));
        let (kafka, target) = resolve("kafka://127.0.0.1:9092", &[]).unwrap();
        let error = kafka.read_lines(&flow, "in", &target).err().unwrap();
        assert!(
            error.to_string().contains("kafka://HOST:PORT/TOPIC"),
            "{error}"
        );
    }
}
