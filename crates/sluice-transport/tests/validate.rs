//! [`TransportSpec::validate`]: every parameter a plan can give is checked without building
//! anything, with a message naming the parameter, its bounds and the value; a parameter a
//! transport does not take is refused when the spec is read.

use sluice_transport::{TransportError, TransportSpec, MAX_QUEUE_CAPACITY};

fn refused(spec: &TransportSpec, senders: usize) -> String {
    spec.validate(senders)
        .expect_err("the spec is out of range")
        .to_string()
}

#[test]
fn defaults_and_sane_parameters_are_accepted() {
    for spec in [
        TransportSpec::Fused,
        TransportSpec::threaded(),
        TransportSpec::shm_osr(),
        TransportSpec::ShmVega {
            slot_bytes: 256,
            slots: 1024,
        },
        TransportSpec::Tcp(Default::default()),
        TransportSpec::UdpMq(Default::default()),
    ] {
        spec.validate(1).unwrap_or_else(|e| panic!("{spec}: {e}"));
    }
    TransportSpec::shm_osr().validate(16).unwrap();
}

#[test]
fn sizes_and_sender_counts_out_of_range_are_named_with_their_bounds() {
    let threaded = |capacity| TransportSpec::Threaded { capacity };
    assert_eq!(
        refused(&threaded(1 << 32), 1),
        format!("transport threaded: capacity must be between 1 and {MAX_QUEUE_CAPACITY}, got 4294967296")
    );
    assert!(refused(&threaded(0), 1).contains("capacity must be between 1 and"));
    let vega = |slot_bytes, slots| TransportSpec::ShmVega { slot_bytes, slots };
    assert_eq!(
        refused(&vega(0, 16), 1),
        "transport shm-vega: slot_bytes must be at least 1, got 0"
    );
    assert!(refused(&vega(1 << 32, 16), 1).contains("above the limit"));
    assert!(refused(&vega(256, 0), 1).contains("at least one slot"));
    assert_eq!(
        refused(&vega(256, 16), 2),
        "the shm-vega transport takes one sender per receiver, not 2"
    );
    assert_eq!(
        refused(&TransportSpec::shm_osr(), 1025),
        "transport shm-osr: senders must be between 1 and 1024, got 1025"
    );
    let osr = |capacity_bytes, batch_bytes| TransportSpec::ShmOsr {
        capacity_bytes,
        batch_bytes,
    };
    assert!(refused(&osr(100, 64), 1).contains("capacity_bytes"));
    assert!(refused(&osr(1 << 20, 0), 1).contains("batch_bytes must be at least 1"));
}

#[test]
fn mpi_is_refused_where_it_is_not_built() {
    let mpi = TransportSpec::Mpi(Default::default());
    if cfg!(feature = "mpi") {
        mpi.validate(2).unwrap();
    } else {
        assert_eq!(
            mpi.validate(1),
            Err(TransportError::NotBuilt {
                transport: "mpi",
                feature: "mpi"
            })
        );
    }
}

#[test]
fn a_parameter_the_transport_does_not_take_is_refused_when_read() {
    for json in [
        r#"{"kind": "shm-vega", "slot_bytes": 64, "slots": 8, "slot_byte": 3}"#,
        r#"{"kind": "shm-osr", "capacity": 1024}"#,
        r#"{"kind": "threaded", "capacity": 8, "spin": true}"#,
        r#"{"kind": "tcp", "batchbytes": 3}"#,
        r#"{"kind": "udp-mq", "queue": 3}"#,
        r#"{"kind": "mpi", "credits": 3}"#,
    ] {
        let error = serde_json::from_str::<TransportSpec>(json)
            .expect_err(json)
            .to_string();
        assert!(error.contains("unknown field"), "{json}: {error}");
    }
    let spec: TransportSpec = serde_json::from_str(r#"{"kind": "tcp", "batch_bytes": 3}"#).unwrap();
    assert!(matches!(spec, TransportSpec::Tcp(p) if p.batch_bytes == 3));
}
