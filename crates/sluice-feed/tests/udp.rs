//! The sender over loopback UDP: every packet of every channel arrives, in order, at a modest
//! rate, unicast and (where the host allows it) multicast.

use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4, UdpSocket};
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use sluice_feed::{
    decode_packet, send, Destinations, FeedConfig, SendOptions, OPRA_FEB_2008_PACKETS_PER_SEC,
};
use socket2::{Domain, Protocol, SockAddr, Socket, Type};

const CHANNELS: usize = 2;
const PACKETS: u64 = 1_000;

/// A receiving socket bound to `address`, with room for the whole test's packets.
fn receiver(address: SocketAddr, group: Option<Ipv4Addr>) -> std::io::Result<UdpSocket> {
    let socket = Socket::new(Domain::IPV4, Type::DGRAM, Some(Protocol::UDP))?;
    socket.set_reuse_address(true)?;
    socket.set_recv_buffer_size(4 << 20)?;
    socket.bind(&SockAddr::from(address))?;
    if let Some(group) = group {
        socket.join_multicast_v4(&group, &Ipv4Addr::LOCALHOST)?;
    }
    socket.set_read_timeout(Some(Duration::from_millis(500)))?;
    Ok(socket.into())
}

/// Sends PACKETS packets at 1x (24,000 packets/s) to `destinations` and checks what `sockets`
/// (one per channel) received: every packet, in order, decodable, on its channel.
fn send_and_receive_all(destinations: Destinations, sockets: Vec<UdpSocket>) {
    let receivers: Vec<_> = sockets
        .into_iter()
        .map(|socket| {
            std::thread::spawn(move || {
                let mut packets = Vec::new();
                let mut buffer = [0u8; 2048];
                while let Ok(n) = socket.recv(&mut buffer) {
                    packets.push(buffer[..n].to_vec());
                }
                packets
            })
        })
        .collect();
    let config = FeedConfig {
        channels: CHANNELS,
        ..FeedConfig::default()
    };
    let options = SendOptions {
        max_packets: Some(PACKETS),
        duration: Some(Duration::from_secs(20)),
        ..SendOptions::new(config, destinations, 1.0)
    };
    let report = send(&options, &AtomicBool::new(false)).unwrap();
    assert_eq!(report.packets, PACKETS);
    assert_eq!(report.packets_per_channel, [PACKETS / 2, PACKETS / 2]);
    let target = OPRA_FEB_2008_PACKETS_PER_SEC as f64;
    assert_eq!(report.target_packets_per_sec, Some(target));
    println!(
        "{} packets in {:?}: {:.0} packets/s (asked {target}), {} sendmmsg calls, max lag {:?}",
        report.packets,
        report.elapsed,
        report.achieved_packets_per_sec,
        report.system_calls,
        report.max_lag
    );
    let mut messages = Vec::new();
    let mut total_messages = 0;
    for (channel, receiver) in receivers.into_iter().enumerate() {
        let packets = receiver.join().unwrap();
        assert_eq!(packets.len() as u64, PACKETS / 2, "channel {channel}");
        let mut next_seq = 1;
        for (i, packet) in packets.iter().enumerate() {
            let header = decode_packet(packet, &mut messages).unwrap();
            assert_eq!(usize::from(header.channel), channel);
            assert_eq!(header.packet_seq, i as u64 + 1);
            assert_eq!(header.first_seq, next_seq);
            assert!(header.sent_ns > 0);
            next_seq += u64::from(header.count);
            total_messages += u64::from(header.count);
        }
    }
    assert_eq!(report.messages, total_messages);
}

#[test]
fn unicast_delivers_every_packet_in_order() {
    let sockets: Vec<UdpSocket> = (0..CHANNELS)
        .map(|_| receiver("127.0.0.1:0".parse().unwrap(), None).unwrap())
        .collect();
    let addresses = sockets.iter().map(|s| s.local_addr().unwrap()).collect();
    send_and_receive_all(Destinations::Unicast(addresses), sockets);
}

#[test]
fn loopback_multicast_delivers_every_packet_in_order() {
    let first_group = Ipv4Addr::new(239, 255, 77, 10);
    let joined = (|| {
        let first = receiver(SocketAddrV4::new(first_group, 0).into(), Some(first_group))?;
        let port = first.local_addr()?.port();
        let mut sockets = vec![first];
        for c in 1..CHANNELS {
            let group = Ipv4Addr::from(u32::from(first_group) + c as u32);
            sockets.push(receiver(
                SocketAddrV4::new(group, port).into(),
                Some(group),
            )?);
        }
        Ok::<_, std::io::Error>((sockets, port))
    })();
    let (sockets, port) = match joined {
        Ok(joined) => joined,
        Err(e) => {
            sluice_skip::skip(format!(
                "cannot join a multicast group on loopback here: {e}"
            ));
            return;
        }
    };
    send_and_receive_all(Destinations::loopback_multicast(first_group, port), sockets);
}

#[test]
fn a_sender_of_some_channels_sends_only_those_at_their_share_of_the_rate() {
    let sockets: Vec<UdpSocket> = (0..CHANNELS)
        .map(|_| receiver("127.0.0.1:0".parse().unwrap(), None).unwrap())
        .collect();
    let addresses = sockets.iter().map(|s| s.local_addr().unwrap()).collect();
    let config = FeedConfig {
        channels: CHANNELS,
        ..FeedConfig::default()
    };
    let options = SendOptions {
        max_packets: Some(100),
        channels: Some(vec![1]),
        ..SendOptions::new(config, Destinations::Unicast(addresses), 1.0)
    };
    let report = send(&options, &AtomicBool::new(false)).unwrap();
    assert_eq!(report.packets_per_channel, [0, 100]);
    assert_eq!(report.target_packets_per_sec, Some(12_000.0));
    let mut buffer = [0u8; 2048];
    let mut messages = Vec::new();
    for packet_seq in 1..=100 {
        let n = sockets[1].recv(&mut buffer).unwrap();
        let header = decode_packet(&buffer[..n], &mut messages).unwrap();
        assert_eq!((header.channel, header.packet_seq), (1, packet_seq));
    }
    sockets[0].set_nonblocking(true).unwrap();
    assert!(
        sockets[0].recv(&mut buffer).is_err(),
        "channel 0 was not to be sent"
    );
}

#[test]
fn a_sender_that_cannot_keep_up_still_stops_at_its_duration() {
    let sink = receiver("127.0.0.1:0".parse().unwrap(), None).unwrap();
    let config = FeedConfig {
        channels: 1,
        ..FeedConfig::default()
    };
    let options = SendOptions {
        duration: Some(Duration::from_millis(300)),
        // 240 million packets/s: far beyond any sender.
        ..SendOptions::new(
            config,
            Destinations::Unicast(vec![sink.local_addr().unwrap()]),
            10_000.0,
        )
    };
    let watchdog = std::time::Instant::now();
    let report = send(&options, &AtomicBool::new(false)).unwrap();
    assert!(watchdog.elapsed() < Duration::from_secs(10), "{report:?}");
    assert!(report.packets > 0);
    assert!(report.achieved_packets_per_sec < report.target_packets_per_sec.unwrap());
    assert!(report.max_lag > Duration::ZERO);
}

#[test]
fn bad_destinations_are_clear_errors() {
    let stop = AtomicBool::new(false);
    let config = FeedConfig::default();
    let options = SendOptions::new(
        config.clone(),
        Destinations::Unicast(vec!["127.0.0.1:9".parse().unwrap()]),
        1.0,
    );
    let error = send(&options, &stop).unwrap_err().to_string();
    assert_eq!(
        error,
        "invalid feed setting: a feed of 4 channels needs 4 unicast addresses, one per channel; \
         got 1"
    );
    let options = SendOptions::new(
        config,
        Destinations::loopback_multicast(Ipv4Addr::new(239, 255, 255, 254), 5000),
        1.0,
    );
    let error = send(&options, &stop).unwrap_err().to_string();
    assert!(error.contains("is not a multicast address"), "{error}");
}
