//! Reading a software NAA's metrics endpoint in tests: a GET, the exposition parsed with
//! `prometheus-parse`, one sample's value.

use std::net::SocketAddr;
use std::time::Duration;

use naaice::swnaa::{METRICS_PATH, SoftNaaHandle};
use prometheus_parse::{Scrape, Value};

/// GETs `path` from the endpoint: (status, content type, body).
pub(crate) fn get(addr: SocketAddr, path: &str) -> (u16, String, String) {
    let agent = ureq::Agent::new_with_config(
        ureq::Agent::config_builder()
            .http_status_as_error(false)
            .timeout_global(Some(Duration::from_secs(10)))
            .build(),
    );
    let mut response = agent
        .get(format!("http://{addr}{path}"))
        .call()
        .expect("the metrics endpoint answers");
    let status = response.status().as_u16();
    let content_type = response
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    let body = response.body_mut().read_to_string().expect("a text body");
    (status, content_type, body)
}

/// The exposition, parsed.
pub(crate) fn scrape(naa: &SoftNaaHandle) -> Scrape {
    let addr = naa.metrics_addr().expect("metrics on");
    let (status, content_type, body) = get(addr, METRICS_PATH);
    assert_eq!(status, 200, "{body}");
    assert!(
        content_type.starts_with("text/plain; version=0.0.4"),
        "{content_type}"
    );
    Scrape::parse(body.lines().map(|l| Ok(l.to_owned()))).expect("the exposition parses")
}

/// The value of the sample `name` whose labels include `labels`.
pub(crate) fn value(s: &Scrape, name: &str, labels: &[(&str, &str)]) -> f64 {
    let found: Vec<f64> = s
        .samples
        .iter()
        .filter(|x| x.metric == name)
        .filter(|x| labels.iter().all(|(k, v)| x.labels.get(k) == Some(*v)))
        .map(|x| match &x.value {
            Value::Counter(v) | Value::Gauge(v) | Value::Untyped(v) => *v,
            Value::Histogram(b) => b.last().map_or(0.0, |b| b.count),
            Value::Summary(_) => f64::NAN,
        })
        .collect();
    assert_eq!(
        found.len(),
        1,
        "one sample {name} {labels:?}: {:#?}",
        s.samples
    );
    found[0]
}
