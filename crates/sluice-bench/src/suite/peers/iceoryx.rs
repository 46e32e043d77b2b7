//! iceoryx2 as a peer: publish-subscribe of byte slices through its shared memory between two
//! processes. The service forbids safe overflow and the publisher retries until delivered, so
//! a slow subscriber holds the publisher back and nothing is lost (what Sluice's rings do).
//! Each tuple is one loaned sample, written from the tuple's bytes and sent; the end is an
//! empty sample.

use std::time::Instant;

use anyhow::{anyhow, bail};
use iceoryx2::port::publisher::Publisher;
use iceoryx2::prelude::*;
use iceoryx2::service::port_factory::publish_subscribe::PortFactory;
use sluice_sync::IdleStrategy;

use crate::transports::endpoints::PATIENCE;
use crate::transports::network::RawWriter;

/// Samples a subscriber may hold unread: enough to keep both sides busy.
const BUFFER: usize = 256;

/// iceoryx2 reports its errors as enums without `std::error::Error` in every case.
fn failed(what: &str) -> impl FnOnce(&dyn std::fmt::Debug) -> anyhow::Error + '_ {
    move |e| anyhow!("iceoryx2: {what}: {e:?}")
}

/// Creates or opens the service `name`, configured alike on both sides.
fn service(
    node: &Node<ipc::Service>,
    name: &str,
) -> anyhow::Result<PortFactory<ipc::Service, [u8], ()>> {
    let name: ServiceName = name.try_into().map_err(|e| failed("service name")(&e))?;
    node.service_builder(&name)
        .publish_subscribe::<[u8]>()
        .enable_safe_overflow(false)
        .subscriber_max_buffer_size(BUFFER)
        .open_or_create()
        .map_err(|e| failed("open the service")(&e))
}

fn node() -> anyhow::Result<Node<ipc::Service>> {
    set_log_level(LogLevel::Error);
    NodeBuilder::new()
        .create::<ipc::Service>()
        .map_err(|e| failed("create a node")(&e))
}

/// The sender: a publisher on the service.
pub(super) struct IceoryxWriter {
    publisher: Publisher<ipc::Service, [u8], ()>,
    // Kept alive as long as the publisher.
    _service: PortFactory<ipc::Service, [u8], ()>,
    _node: Node<ipc::Service>,
}

impl IceoryxWriter {
    /// A publisher of samples of up to `size` bytes on the service `name`.
    pub(super) fn open(name: &str, size: usize) -> anyhow::Result<Self> {
        let node = node()?;
        let service = service(&node, name)?;
        let publisher = service
            .publisher_builder()
            .initial_max_slice_len(size.max(1))
            .backpressure_strategy(BackpressureStrategy::RetryUntilDelivered)
            .create()
            .map_err(|e| failed("create a publisher")(&e))?;
        Ok(Self {
            publisher,
            _service: service,
            _node: node,
        })
    }
}

impl RawWriter for IceoryxWriter {
    fn write(&mut self, tuple: &[u8]) -> anyhow::Result<()> {
        let sample = self
            .publisher
            .loan_slice_uninit(tuple.len())
            .map_err(|e| failed("loan a sample")(&e))?;
        sample
            .write_from_slice(tuple)
            .send()
            .map_err(|e| failed("send")(&e))?;
        Ok(())
    }

    fn finish(&mut self) -> anyhow::Result<()> {
        self.write(&[])
    }
}

/// The receiving process's loop: subscribes to the service `name`, announces it, and hands
/// every sample of `size` bytes to `record` until an empty one arrives.
pub(super) fn receive(
    name: &str,
    size: usize,
    idle: IdleStrategy,
    announce: impl Fn(&str),
    record: &mut impl FnMut(&[u8]) -> anyhow::Result<()>,
) -> anyhow::Result<()> {
    let node = node()?;
    let service = service(&node, name)?;
    let subscriber = service
        .subscriber_builder()
        .create()
        .map_err(|e| failed("create a subscriber")(&e))?;
    announce(name);
    let mut idle = idle.waiter();
    let mut heard = Instant::now();
    loop {
        match subscriber.receive().map_err(|e| failed("receive")(&e))? {
            Some(sample) => {
                let bytes = sample.payload();
                if bytes.is_empty() {
                    return Ok(());
                }
                if bytes.len() != size {
                    bail!(
                        "an iceoryx2 sample of {} bytes is neither a tuple of {size} nor the end",
                        bytes.len()
                    );
                }
                record(bytes)?;
                heard = Instant::now();
                idle.after(1);
            }
            None if heard.elapsed() > PATIENCE => {
                bail!("nothing from the iceoryx2 publisher for {PATIENCE:?}")
            }
            None => idle.after(0),
        }
    }
}
