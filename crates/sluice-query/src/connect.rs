//! SCSQL's way to the connector registry (`sluice_connectors::registry`): `input(connector,
//! address [, topic])` reads the lines a connector reads, `output(s, connector, address [,
//! topic])` writes the elements of `s` as lines, for every connector of the registry that reads
//! or writes (a file, TCP, UDP, standard output, a Kafka topic): `input('kafka',
//! '127.0.0.1:9092', 'lines')` is the registry's `kafka://127.0.0.1:9092/lines`.
//!
//! The binder checks the address when it binds the call ([`check`]), so a connector that is
//! not in the registry, one that cannot go the asked way, or a malformed address is a
//! diagnostic at the argument; [`crate::lower`] then adds the connector's operators with
//! [`read`] and [`write`] beside the stream process's own, in its thread. A connector's client
//! settings are the driver's `kafka.KEY` settings (`--set kafka.KEY=VALUE`).

use sluice_connectors::registry::{resolve, AddressError};
use sluice_ops::{Dataflow, IterSource, Sink, Stream};

use crate::value::Value;

/// The registry's address of a connector, its address and an optional topic (a path's last
/// part): `('kafka', '127.0.0.1:9092', 'lines')` is `kafka://127.0.0.1:9092/lines`.
pub fn address(connector: &str, target: &str, topic: Option<&str>) -> String {
    match topic {
        Some(topic) => format!("{connector}://{target}/{topic}"),
        None => format!("{connector}://{target}"),
    }
}

/// Adds the connector `address` names under `name`, its lines as string values.
pub fn read(
    flow: &Dataflow,
    name: &str,
    address: &str,
    settings: &[(String, String)],
) -> Result<Stream<Value>, AddressError> {
    let (connector, target) = resolve(address, settings)?;
    let lines = connector.read_lines(flow, &format!("{name}-in"), &target)?;
    Ok(lines.map(name, |line: &String| Value::String(line.clone())))
}

/// Ends `values` in the connector `address` names, under `name`, a line each (a string as it
/// is, any other value as the shell prints it).
pub fn write(
    values: &Stream<Value>,
    name: &str,
    address: &str,
    settings: &[(String, String)],
) -> Result<Sink, AddressError> {
    let (connector, target) = resolve(address, settings)?;
    let lines = values.map(&format!("{name}-lines"), Value::to_string);
    connector.write_lines(&lines, name, &target)
}

/// Whether `address` names a connector of the registry that can be an input (`input`) or an
/// output, at an address it takes. Nothing is opened: the connector's operators are made in a
/// graph that is thrown away.
pub fn check(address: &str, input: bool) -> Result<(), AddressError> {
    let flow = Dataflow::new("check");
    if input {
        read(&flow, "check", address, &[]).map(drop)
    } else {
        let values = flow.source("check", |_| IterSource::new(std::iter::empty::<Value>()));
        write(&values, "check", address, &[]).map(drop)
    }
}
