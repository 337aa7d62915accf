//! Which engine answers, and which of its counters can be read.
//!
//! The metrics dialect comes from the names on the engine's Prometheus page: `/metrics`
//! (vLLM, SGLang with `--enable-metrics`, llama.cpp with `--metrics`) or `/prometheus/metrics`
//! (`trtllm-serve` with `return_perf_metrics`). Without such a page an engine is still
//! recognised by its own endpoints, so its family (and so the profile key) does not change
//! with a metrics flag:
//!
//! - SGLang without `--enable-metrics` has no `/metrics` (404), but answers `/model_info`
//!   (older builds: `/get_model_info`) with `model_path` and `is_generation`
//!   (python/sglang/srt/entrypoints/http_server.py);
//! - `trtllm-serve` without `return_perf_metrics` has no `/prometheus/metrics`, and its
//!   `/metrics` is a JSON list of iteration stats (`get_iteration_stats`), empty when no
//!   iteration ran since the last call.
//!
//! A recognised engine without counters is named as such ("sglang (metrics disabled)") with a
//! warning: readiness then rests on the client's streams and no cross-check against the
//! engine's counter can run.

use std::time::Duration;

use super::BenchError;

use super::client::{EngineClient, ReadError};
use super::metrics::{MetricsDialect, parse_prometheus};

/// What the probes found out about the engine.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Identified {
    /// The Prometheus dialect, when the engine serves one.
    pub(crate) metrics: Option<MetricsDialect>,
    /// The engine family for the profile key, when recognised (with or without metrics).
    pub(crate) family: Option<&'static str>,
    /// What `engine.metrics_flavor` records: the dialect's name, `sglang-metrics-disabled`,
    /// `trtllm-iteration-stats` or `none`.
    pub(crate) flavor: &'static str,
    /// How the engine is named in the start-up notes.
    pub(crate) label: &'static str,
    /// Said at start-up when the engine's counters cannot be read.
    pub(crate) warning: Option<String>,
}

impl Identified {
    fn with_metrics(d: MetricsDialect) -> Self {
        Identified {
            metrics: Some(d),
            family: Some(d.name()),
            flavor: d.name(),
            label: d.name(),
            warning: None,
        }
    }
}

/// Whether a `/metrics` answer is TensorRT-LLM's JSON iteration stats: a JSON list, empty or of
/// objects carrying its iteration fields.
pub fn is_trtllm_iteration_stats(body: &str) -> bool {
    let Ok(serde_json::Value::Array(items)) = serde_json::from_str::<serde_json::Value>(body)
    else {
        return false;
    };
    items.iter().all(|i| {
        i.as_object().is_some_and(|o| {
            ["iter", "iterLatencyMS", "numActiveRequests", "kvCacheStats"]
                .iter()
                .any(|k| o.contains_key(*k))
        })
    })
}

/// Whether a body is SGLang's `/model_info` answer.
pub(crate) fn is_sglang_model_info(body: &str) -> bool {
    serde_json::from_str::<serde_json::Value>(body)
        .ok()
        .and_then(|v| v.as_object().cloned())
        .is_some_and(|o| o.contains_key("model_path") && o.contains_key("is_generation"))
}

/// Probes the engine's metrics pages (and, without one, its own identifying endpoints).
///
/// A page over the size limit is an error (naming the page, the limit and the fix), not "no
/// metrics": an engine whose page cannot be read would otherwise lose its cross-checks
/// silently.
pub(crate) async fn identify(
    client: &EngineClient,
    timeout: Duration,
) -> Result<Identified, BenchError> {
    let get = |path: &'static str| async move {
        match client.get_text(path, timeout).await {
            Ok((200, text)) => Ok(Some(text)),
            Err(e @ ReadError::TooLarge { .. }) => Err(BenchError::BadResponse {
                url: client.url(path),
                reason: e.to_string(),
            }),
            _ => Ok(None),
        }
    };
    let dialect = |page: &str| MetricsDialect::detect(&parse_prometheus(page));
    let metrics_page = get("/metrics").await?;
    if let Some(d) = metrics_page.as_deref().and_then(dialect) {
        return Ok(Identified::with_metrics(d));
    }
    let trtllm_page = get(MetricsDialect::Trtllm.metrics_path()).await?;
    if let Some(d) = trtllm_page.as_deref().and_then(dialect) {
        return Ok(Identified::with_metrics(d));
    }
    if metrics_page
        .as_deref()
        .is_some_and(is_trtllm_iteration_stats)
    {
        return Ok(Identified {
            metrics: None,
            family: Some("trtllm"),
            flavor: "trtllm-iteration-stats",
            label: "trtllm (no Prometheus metrics)",
            warning: Some(
                "TensorRT-LLM without return_perf_metrics: /prometheus/metrics is absent (its \
                 /metrics is JSON iteration stats), so readiness uses client streams only and \
                 no cross-check against the engine's counters can run; set \
                 `return_perf_metrics: true` (and `enable_iter_perf_stats: true`) in \
                 --extra_llm_api_options"
                    .into(),
            ),
        });
    }
    for path in ["/model_info", "/get_model_info"] {
        if get(path)
            .await?
            .as_deref()
            .is_some_and(is_sglang_model_info)
        {
            return Ok(Identified {
                metrics: None,
                family: Some("sglang"),
                flavor: "sglang-metrics-disabled",
                label: "sglang (metrics disabled)",
                warning: Some(
                    "SGLang without --enable-metrics: /metrics is absent, so readiness uses \
                     client streams only and no cross-check against the engine's counters \
                     can run; start it with --enable-metrics"
                        .into(),
                ),
            });
        }
    }
    Ok(Identified {
        metrics: None,
        family: None,
        flavor: "none",
        label: "none",
        warning: Some(
            "no engine metrics at /metrics or /prometheus/metrics (vLLM/SGLang/llama.cpp/\
             TensorRT-LLM names): readiness uses client streams only and server_tps is not \
             validated"
                .into(),
        ),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::fixture;
    use axum::Router;
    use axum::routing::get;

    /// Serves `routes` (path, body) on 127.0.0.1 until the returned guard is dropped; every
    /// other path is a 404, as on the real engines.
    async fn serve(
        routes: Vec<(&'static str, String)>,
    ) -> (EngineClient, tokio::task::JoinHandle<()>) {
        let mut app = Router::new();
        for (path, body) in routes {
            app = app.route(path, get(move || async move { body }));
        }
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        let client = EngineClient::new(&format!("http://{addr}"), None, 1).unwrap();
        (client, task)
    }

    const T: Duration = Duration::from_secs(5);

    #[tokio::test]
    async fn trtllm_with_perf_metrics_reads_its_prometheus_page() {
        let (client, task) = serve(vec![
            ("/metrics", fixture("trtllm-iteration-stats.json")),
            ("/prometheus/metrics", fixture("metrics-trtllm.txt")),
        ])
        .await;
        let id = identify(&client, T).await.unwrap();
        assert_eq!(id.metrics, Some(MetricsDialect::Trtllm));
        assert_eq!((id.family, id.flavor), (Some("trtllm"), "trtllm"));
        assert!(id.warning.is_none());
        // The scrape goes to the dialect's own path and reads the recorded page.
        let (_, st) = super::super::metrics::scrape(&client, id.metrics)
            .await
            .unwrap();
        assert_eq!(st.running, Some(16.0));
        assert_eq!(st.generated_tokens, Some(212_480.0));
        task.abort();
    }

    #[tokio::test]
    async fn trtllm_without_perf_metrics_is_named_not_anonymous() {
        for body in [fixture("trtllm-iteration-stats.json"), "[]".to_string()] {
            let (client, task) = serve(vec![("/metrics", body)]).await;
            let id = identify(&client, T).await.unwrap();
            assert_eq!(id.metrics, None);
            assert_eq!(
                id.family,
                Some("trtllm"),
                "same profile key as with metrics"
            );
            assert_eq!(id.flavor, "trtllm-iteration-stats");
            assert!(id.warning.unwrap().contains("return_perf_metrics"));
            task.abort();
        }
    }

    #[tokio::test]
    async fn sglang_without_metrics_keeps_its_family() {
        for path in ["/model_info", "/get_model_info"] {
            let (client, task) = serve(vec![(path, fixture("sglang-model-info.json"))]).await;
            let id = identify(&client, T).await.unwrap();
            assert_eq!(id.metrics, None);
            assert_eq!(id.family, Some("sglang"), "{path}");
            assert_eq!(id.label, "sglang (metrics disabled)");
            assert_eq!(id.flavor, "sglang-metrics-disabled");
            assert!(id.warning.unwrap().contains("--enable-metrics"));
            task.abort();
        }
        // With metrics it is the same family: one baseline group either way.
        let (client, task) = serve(vec![
            ("/metrics", fixture("metrics-sglang.txt")),
            ("/model_info", fixture("sglang-model-info.json")),
        ])
        .await;
        let id = identify(&client, T).await.unwrap();
        assert_eq!(
            (id.metrics, id.family),
            (Some(MetricsDialect::Sglang), Some("sglang"))
        );
        task.abort();
    }

    #[tokio::test]
    async fn llamacpp_pages_and_unknown_engines() {
        let (client, task) = serve(vec![("/metrics", fixture("llamacpp-metrics.txt"))]).await;
        let id = identify(&client, T).await.unwrap();
        assert_eq!(id.metrics, Some(MetricsDialect::Llamacpp));
        let (_, st) = super::super::metrics::scrape(&client, id.metrics)
            .await
            .unwrap();
        assert_eq!(st.generated_tokens, Some(4624.0));
        task.abort();
        // Something that is none of them stays openai-compatible, with the old warning.
        let (client, task) =
            serve(vec![("/metrics", "process_cpu_seconds_total 3\n".into())]).await;
        let id = identify(&client, T).await.unwrap();
        assert_eq!((id.metrics, id.family, id.flavor), (None, None, "none"));
        task.abort();
    }

    #[test]
    fn recognisers_reject_lookalikes() {
        assert!(!is_trtllm_iteration_stats(r#"{"iter":1}"#));
        assert!(!is_trtllm_iteration_stats(r#"[{"foo":1}]"#));
        assert!(!is_trtllm_iteration_stats("vllm:num_requests_running 1"));
        assert!(!is_sglang_model_info(r#"{"model_path":"x"}"#));
        assert!(!is_sglang_model_info("not json"));
    }
}
