//! `sluice plan APP --svg FILE`: the drawing is well-formed XML and names every PE and every
//! operator instance of the plan, for small and large plans (vwap under `processes`: 332
//! instances, a PE each).

mod common;

use common::{sluice, stdout};

/// The names the plan of `app` under `plan` gives its PEs and instances, from `--json`.
fn names(app: &str, plan: &str) -> (Vec<String>, Vec<String>) {
    let o = sluice(&["plan", app, "--plan", plan, "--json"]);
    assert!(o.status.success(), "{}", common::stderr(&o));
    let json: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    let field = |list: &str| -> Vec<String> {
        json[list]
            .as_array()
            .unwrap()
            .iter()
            .map(|x| x["name"].as_str().unwrap().to_string())
            .collect()
    };
    (field("pes"), field("instances"))
}

#[test]
fn the_drawing_is_xml_naming_every_pe_and_operator() {
    let dir = tempfile::tempdir().unwrap();
    for (app, plan) in [
        ("wordcount", "fused"),
        ("wordcount", "processes"),
        ("sol", "threaded"),
        ("vwap", "processes"),
    ] {
        let file = dir.path().join(format!("{app}-{plan}.svg"));
        let o = sluice(&["plan", app, "--plan", plan, "--svg", file.to_str().unwrap()]);
        assert!(o.status.success(), "{app} {plan}: {}", common::stderr(&o));
        assert!(stdout(&o).is_empty(), "{}", stdout(&o));
        let text = std::fs::read_to_string(&file).unwrap();
        let document = roxmltree::Document::parse(&text)
            .unwrap_or_else(|e| panic!("{app} {plan}: not XML: {e}"));
        assert_eq!(document.root_element().tag_name().name(), "svg");
        let attribute = |kind: &str, name: &str| -> Vec<String> {
            document
                .descendants()
                .filter(|n| n.attribute("class") == Some(kind))
                .filter_map(|n| n.attribute(name).map(str::to_string))
                .collect()
        };
        let texts: Vec<&str> = document.descendants().filter_map(|n| n.text()).collect();
        let (pes, instances) = names(app, plan);
        let mut drawn_pes = attribute("pe", "data-pe");
        drawn_pes.sort();
        let mut expected_pes = pes.clone();
        expected_pes.sort();
        assert_eq!(drawn_pes, expected_pes, "{app} {plan}");
        for pe in &pes {
            assert!(
                texts.iter().any(|t| t.contains(&format!("'{pe}'"))),
                "{app} {plan}: PE {pe} is not named"
            );
        }
        let mut drawn = attribute("op", "data-op");
        drawn.sort();
        let mut expected = instances.clone();
        expected.sort();
        assert_eq!(drawn, expected, "{app} {plan}");
        for instance in &instances {
            assert!(
                texts.contains(&instance.as_str()),
                "{app} {plan}: {instance} has no label"
            );
        }
    }
}

#[test]
fn an_unwritable_svg_file_is_a_one_line_error() {
    let o = sluice(&["plan", "wordcount", "--svg", "/nonexistent-dir/plan.svg"]);
    assert!(!o.status.success());
    let err = common::stderr(&o);
    assert!(
        err.starts_with("error: cannot write /nonexistent-dir/plan.svg"),
        "{err}"
    );
    assert!(!err.contains("panicked"), "{err}");
}
