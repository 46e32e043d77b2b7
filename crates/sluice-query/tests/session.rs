//! A session's statements run in their order: each query (run or explained) sees the
//! `create function` and `set` statements before it and none after it; a user function's
//! results are what its declared type says.

use sluice_query::{QueryError, QueryOptions, Session};

/// What `text` prints, a result per line, in a new session.
fn results(text: &str) -> Result<Vec<String>, QueryError> {
    let mut printed = Vec::new();
    Session::new().run("-e", text, &QueryOptions::default(), &mut |value| {
        printed.push(value.to_string())
    })?;
    Ok(printed)
}

#[test]
fn explain_gives_each_query_the_settings_before_it() {
    let query = "select extract(b) from sp a, sp b \
                 where b=sp(count(extract(a))) and a=sp(gen_array(1000,10));";
    let text = format!(
        "set transport = 'shm-vega'; set buffer = 1000; {query} \
         set buffer = 65536; {query}"
    );
    let plan = Session::new()
        .explain("-e", &text, &QueryOptions::default())
        .unwrap();
    let edges: Vec<&str> = plan.lines().filter(|l| l.contains("sp0 -> sp1")).collect();
    assert_eq!(edges.len(), 2, "{plan}");
    assert!(edges[0].contains("slot_bytes=1000,"), "{plan}");
    assert!(edges[1].contains("slot_bytes=65536,"), "{plan}");
}
