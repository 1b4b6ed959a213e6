//! `reel collect` with real frameworks. A Pydantic AI agent (TestModel,
//! no model service) with instrumentation on, its spans sent by the
//! OpenTelemetry SDK's OTLP/HTTP exporter, gzip-compressed: the run it
//! becomes holds the right calls, arguments, results, error and nesting,
//! with the API key scrubbed, and `reel mcp mock` of that run answers the
//! Python MCP client's same calls with the same results. The same for
//! the Vercel AI SDK (Node), and the OpenAI Agents SDK (a scripted
//! offline model, through OpenInference).
//!
//! Without python3, `pydantic-ai-slim`, the OpenTelemetry SDK and its
//! exporter, and `mcp` (mcp/tests/requirements.txt), or the OpenAI Agents
//! SDK and its instrumentation (tests/agents/requirements.txt), the tests
//! fail, saying what to install (`cargo xtask provision` installs them).

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde_json::{json, Value};

use crate::support::{free_port, reel_command, wait_listening, Killed};

const API_KEY: &str = "wk-3f9c1e7a5b2d4c6e8f0a";

pub(crate) fn agents_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/agents")
}

pub(crate) fn require_peers() {
    let requirements = Path::new(env!("CARGO_MANIFEST_DIR")).join("../mcp/tests/requirements.txt");
    let out = Command::new("python3")
        .args([
            "-c",
            "import pydantic_ai, mcp, opentelemetry.sdk, opentelemetry.exporter.otlp.proto.http",
        ])
        .current_dir(std::env::temp_dir())
        .output()
        .expect("python3 runs");
    assert!(
        out.status.success(),
        "Pydantic AI, the OpenTelemetry SDK and its OTLP/HTTP exporter, or the MCP SDK are \
         missing: install them with `pip install -r {}` ({})",
        requirements.display(),
        String::from_utf8_lossy(&out.stderr).trim()
    );
}

/// Runs the agent (`agent`, its endpoint still to set) against `reel
/// collect`, stops the collector (SIGTERM: it writes what it holds) and
/// returns what it said on standard error.
fn collect_agent(archive: &Path, config: &Path, mut agent: Command) -> String {
    let port = free_port();
    let mut collector = Killed(
        reel_command(config)
            .args(["--archive", archive.to_str().unwrap(), "collect"])
            .args(["--listen", &format!("127.0.0.1:{port}")])
            .args(["--secret-env", "WEATHER_API_KEY"])
            .env("WEATHER_API_KEY", API_KEY)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("reel collect starts"),
    );
    let mut said = String::new();
    BufReader::new(collector.0.stdout.take().unwrap())
        .read_line(&mut said)
        .unwrap();
    assert!(said.contains("/v1/traces"), "{said}");
    wait_listening(port, &mut collector, "reel collect");
    let agent = agent
        .env(
            "OTEL_EXPORTER_OTLP_ENDPOINT",
            format!("http://127.0.0.1:{port}"),
        )
        .env("WEATHER_API_KEY", API_KEY)
        .current_dir(std::env::temp_dir())
        .output()
        .expect("the agent runs");
    assert!(
        agent.status.success(),
        "the agent failed: {}",
        String::from_utf8_lossy(&agent.stderr)
    );
    let stopped = Command::new("kill")
        .args(["-TERM", &collector.0.id().to_string()])
        .status()
        .unwrap();
    assert!(stopped.success());
    let status = collector.0.wait().unwrap();
    let mut stderr = String::new();
    std::io::Read::read_to_string(&mut collector.0.stderr.take().unwrap(), &mut stderr).unwrap();
    assert!(status.success(), "reel collect failed: {stderr}");
    stderr
}

/// The one run's tape, its facts as JSON.
fn tape_facts(archive: &Path, config: &Path) -> (String, Vec<Value>) {
    let runs = reel_command(config)
        .args(["--archive", archive.to_str().unwrap(), "runs", "--json"])
        .output()
        .unwrap();
    let runs: Value = serde_json::from_slice(&runs.stdout).unwrap();
    let runs = runs["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 1, "one trace, one run: {runs:?}");
    let run = runs[0]["run_id"].as_str().unwrap().to_owned();
    let out = reel_command(config)
        .args([
            "--archive",
            archive.to_str().unwrap(),
            "export",
            &run,
            "-o",
            "-",
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(!text.contains(API_KEY), "the API key reached the record");
    let mut lines = text.lines();
    let header: Value = serde_json::from_str(lines.next().unwrap()).unwrap();
    assert_eq!(
        header["format"], "reel.tape.v2",
        "it holds model.called facts"
    );
    let facts = lines
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|f| f.get("kind").is_some())
        .collect();
    (run, facts)
}

/// Each call: (tool, call id, parent call, args, outcome).
fn calls(facts: &[Value]) -> Vec<Call> {
    let mut out = Vec::new();
    for f in facts.iter().filter(|f| f["kind"] == "call.started") {
        let id = f["data"]["call_id"].as_str().unwrap();
        let ended = facts
            .iter()
            .find(|e| e["kind"] == "call.ended" && e["call"] == id)
            .expect("every call ended");
        out.push((
            f["data"]["tool_name"].as_str().unwrap().to_owned(),
            id.to_owned(),
            f["data"]["parent_call"].clone(),
            f["data"]["args"].clone(),
            ended["data"]["outcome"].clone(),
        ));
    }
    out
}

#[test]
fn a_pydantic_ai_agents_spans_become_a_run_that_mocks_to_the_same_results() {
    require_peers();
    let dir = tempfile::tempdir().unwrap();
    let (archive, config) = (dir.path().join("archive"), dir.path().join("config"));
    let mut agent = Command::new("python3");
    // The exporter compresses its requests (reel inflates them).
    agent
        .arg(agents_dir().join("pydantic_otel_agent.py"))
        .env("OTEL_EXPORTER_OTLP_COMPRESSION", "gzip");
    let said = collect_agent(&archive, &config, agent);
    assert!(said.contains("1 run(s) written"), "{said}");
    assert!(
        said.contains("0 retried span(s) dropped, 0 late (in 0 run(s) of their own), 0 rejected"),
        "{said}"
    );
    let (run, facts) = tape_facts(&archive, &config);

    // The run: the agent's trace, its producer the app's resource.
    let started = &facts[0];
    assert_eq!(started["kind"], "run.started");
    assert_eq!(
        started["data"]["producer"],
        json!({"name": "weather-app", "version": "1.2.3"})
    );
    assert_eq!(
        started["data"]["labels"]["gen_ai.agent.name"],
        "weather-agent"
    );
    assert!(started["data"]["identity"]["conversation"].is_string());
    assert_eq!(facts.last().unwrap()["data"]["status"], "completed");

    // The calls, in start order, with their arguments, results, error and nesting.
    let calls = calls(&facts);
    let shape: Vec<(&str, bool, &Value, &str)> = calls
        .iter()
        .map(|(tool, _, parent, args, outcome)| {
            (
                tool.as_str(),
                parent.is_null(),
                args,
                outcome["status"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        shape,
        [
            ("get_weather", true, &json!({"city": "a"}), "ok"),
            ("add", true, &json!({"a": 0, "b": 0}), "ok"),
            ("flaky", true, &json!({"reason": "a"}), "error"),
            ("ask_helper", true, &json!({"question": "a"}), "ok"),
            ("agent:helper", false, &Value::Null, "ok"),
            ("lookup", false, &json!({"term": "a"}), "ok"),
            ("flaky", true, &json!({"reason": "a"}), "ok"),
        ]
    );
    let result = |i: usize| calls[i].4["result"].clone();
    let keyed = result(0).as_str().unwrap().to_owned();
    assert!(keyed.starts_with("sunny in a (key [REDACTED:"), "{keyed}");
    assert_eq!(
        reel::marker::strip_tags(&keyed),
        "sunny in a (key [REDACTED])",
        "the key scrubbed, its marker keyed"
    );
    assert_eq!(result(1), json!("0"), "as the framework recorded it");
    assert_eq!(
        calls[2].4["error"],
        "pydantic_ai.exceptions.ToolRetryError: not now: a"
    );
    assert_eq!(result(2), json!("not now: a"));
    assert_eq!(
        calls[4].2,
        json!(calls[3].1),
        "the sub-agent is beneath the tool that ran it"
    );
    assert_eq!(calls[5].2, json!(calls[4].1), "and its tool beneath it");
    assert_eq!(result(6), json!("ok now"));

    // Model calls: one fact each, three of the agent's (the run's own)
    // and two of the helper's (under its call).
    let models: Vec<&Value> = facts
        .iter()
        .filter(|f| f["kind"] == "model.called")
        .collect();
    let under: Vec<&Value> = models.iter().map(|m| &m["call"]).collect();
    let helper = json!(calls[4].1);
    assert_eq!(
        under,
        [&Value::Null, &helper, &helper, &Value::Null, &Value::Null]
    );
    assert!(models.iter().all(|m| m["data"]["provider"] == "test"
        && m["data"]["input_tokens"].is_u64()
        && m["data"]["tool_definitions"].is_array()));
    let seqs: Vec<u64> = facts.iter().map(|f| f["seq"].as_u64().unwrap()).collect();
    assert_eq!(seqs, (0..facts.len() as u64).collect::<Vec<_>>());
    let times: Vec<i64> = facts.iter().map(|f| f["at"].as_i64().unwrap()).collect();
    assert!(times.windows(2).all(|w| w[0] <= w[1]), "in span time order");

    // The mock answers the same calls with the recorded results.
    let report = mock(&archive, &config, &run, &calls);
    let text = |s: &str, error: bool| json!({"isError": error, "text": [s]});
    assert_eq!(
        report["answers"],
        json!([
            text(&keyed, false),
            text("0", false),
            text("not now: a", true),
            text("{\"lookup\":\"definition of a\"}", false),
            text("ok now", false),
        ])
    );
    // The tools as the spans defined them (gen_ai.tool.definitions).
    let tools = report["tools"].as_array().unwrap();
    let names: Vec<&str> = tools.iter().map(|t| t["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["add", "ask_helper", "flaky", "get_weather"]);
    assert_eq!(tools[3]["description"], "The weather of a city.");
    assert_eq!(tools[3]["inputSchema"]["required"], json!(["city"]));
}

pub(crate) type Call = (String, String, Value, Value, Value);

/// The Python MCP client's report of `reel mcp mock RUN`, asked each
/// top-level call of `calls` in order.
pub(crate) fn mock(archive: &Path, config: &Path, run: &str, calls: &[Call]) -> Value {
    let requests: Vec<Value> = calls
        .iter()
        .filter(|c| c.2.is_null())
        .map(|c| json!({"name": c.0, "arguments": c.3}))
        .collect();
    let mut client = Command::new("python3")
        .arg(agents_dir().join("otel_mock_client.py"))
        .arg(env!("CARGO_BIN_EXE_reel"))
        .arg(archive)
        .arg(run)
        .env("REEL_CONFIG_DIR", config)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    client
        .stdin
        .take()
        .unwrap()
        .write_all(Value::from(requests).to_string().as_bytes())
        .unwrap();
    let out = client.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// Where the Vercel AI SDK, the OpenTelemetry SDK for Node and Node 22
/// are: `REEL_VERCEL_AI`, else `$XDG_CACHE_HOME/reel/vercel-ai` (`~/.cache`
/// without it), where `cargo xtask provision` installs them.
fn vercel_ai() -> PathBuf {
    if let Some(dir) = std::env::var_os("REEL_VERCEL_AI").filter(|v| !v.is_empty()) {
        return dir.into();
    }
    let cache = std::env::var_os("XDG_CACHE_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(std::env::var_os("HOME").unwrap_or_default()).join(".cache")
        });
    cache.join("reel").join("vercel-ai")
}

#[test]
fn a_vercel_ai_sdk_agents_spans_become_a_run_that_mocks_to_the_same_results() {
    require_peers();
    let prefix = vercel_ai();
    assert!(
        prefix.join("node_modules/ai/package.json").is_file(),
        "the Vercel AI SDK is missing in {}: run `cargo xtask provision` (or set REEL_VERCEL_AI)",
        prefix.display()
    );
    let dir = tempfile::tempdir().unwrap();
    let (archive, config) = (dir.path().join("archive"), dir.path().join("config"));
    let mut agent = Command::new("node");
    agent
        .arg(agents_dir().join("vercel_ai_agent.mjs"))
        .env("REEL_VERCEL_AI", &prefix);
    let said = collect_agent(&archive, &config, agent);
    assert!(said.contains("1 run(s) written"), "{said}");
    let (run, facts) = tape_facts(&archive, &config);
    assert_eq!(facts[0]["data"]["producer"]["name"], "vercel-weather");
    assert_eq!(
        facts[0]["data"]["labels"]["otel.root_span"],
        "ai.generateText"
    );
    // Three calls of the first step, started together (their order among
    // themselves is the spans' ids'): compared by name.
    let mut calls = calls(&facts);
    calls.sort_by(|a, b| a.0.cmp(&b.0));
    let seen: Vec<(&str, &str, &Value, &Value)> = calls
        .iter()
        .map(|(tool, id, parent, args, outcome)| {
            assert!(parent.is_null());
            (tool.as_str(), id.as_str(), args, outcome)
        })
        .collect();
    assert_eq!(
        seen,
        [
            (
                "add",
                "call-2",
                &json!({"a": 2, "b": 3}),
                &json!({"status": "ok", "result": "5"})
            ),
            (
                "explode",
                "call-3",
                &json!({"why": "test"}),
                &json!({"status": "error", "error": "boom: test"})
            ),
            (
                "weather",
                "call-1",
                &json!({"city": "Paris"}),
                &json!({"status": "ok", "result": "{\"city\":\"Paris\",\"sky\":\"sunny\"}"})
            ),
        ]
    );
    let models: Vec<&Value> = facts
        .iter()
        .filter(|f| f["kind"] == "model.called")
        .collect();
    assert_eq!(models.len(), 2, "one per step");
    assert_eq!(models[0]["data"]["finish_reasons"], json!(["tool-calls"]));
    assert_eq!(models[1]["data"]["output_tokens"], 5);

    let report = mock(&archive, &config, &run, &calls);
    let text = |s: &str, error: bool| json!({"isError": error, "text": [s]});
    assert_eq!(
        report["answers"],
        json!([
            text("5", false),
            text("boom: test", true),
            text("{\"city\":\"Paris\",\"sky\":\"sunny\"}", false),
        ])
    );
    let tools = report["tools"].as_array().unwrap();
    let names: Vec<&str> = tools.iter().map(|t| t["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["add", "explode", "weather"]);
    assert_eq!(tools[2]["description"], "The weather of a city.");
    assert_eq!(
        tools[2]["inputSchema"]["properties"]["city"]["type"],
        "string"
    );
}

/// reel's own OTLP export is a GenAI producer like any other: the demo's
/// runs sent with `reel export --otlp` come back through `reel collect`
/// with the same tools, durations and outcomes.
#[test]
fn reels_own_otlp_export_comes_back_through_collect() {
    let dir = tempfile::tempdir().unwrap();
    let (demo, taken, config) = (
        dir.path().join("demo"),
        dir.path().join("taken"),
        dir.path().join("config"),
    );
    let out = crate::support::reel(&config, &["--archive", demo.to_str().unwrap(), "demo"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // The exporter reads its endpoint from its argument: the environment's
    // (which `collect_agent` sets) passed through a shell.
    let mut agent = Command::new("sh");
    agent
        .args(["-c", r#"exec "$0" "$@" "$OTEL_EXPORTER_OTLP_ENDPOINT""#])
        .arg(env!("CARGO_BIN_EXE_reel"))
        .args(["--color", "never", "--archive"])
        .arg(&demo)
        .args(["export", "--content", "--otlp"]);
    agent.env("REEL_CONFIG_DIR", &config);
    let said = collect_agent(&taken, &config, agent);
    assert!(said.contains("5 run(s) written"), "{said}");
    let summary = |archive: &Path| {
        let out = reel_command(&config)
            .args(["--archive", archive.to_str().unwrap(), "runs", "--json"])
            .output()
            .unwrap();
        let runs: Value = serde_json::from_slice(&out.stdout).unwrap();
        let mut rows: Vec<(Value, Value, i64)> = runs["runs"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| {
                let took = r["ended_at"].as_i64().unwrap() - r["started_at"].as_i64().unwrap();
                (r["tools"].clone(), r["calls"].clone(), took)
            })
            .collect();
        rows.sort_by_key(|r| r.2);
        rows
    };
    let (sent, back) = (summary(&demo), summary(&taken));
    assert_eq!(sent.len(), back.len());
    for (s, b) in sent.iter().zip(&back) {
        assert_eq!((&s.0, &s.1), (&b.0, &b.1));
        // The export's span times are the run's clock read at the fact;
        // they agree to within microseconds.
        assert!((s.2 - b.2).abs() < 10_000, "{s:?} vs {b:?}");
    }
}

/// The OpenAI Agents SDK (a scripted offline model), traced through
/// OpenInference: the workflow is the run, the agent a call, its three
/// tools calls beneath it with their arguments (the call's input, not the
/// tool's schema), results and the failure; the API key scrubbed. The
/// mock serves the agent's tools, defined as the tool spans carried them.
#[test]
fn an_openai_agents_sdk_agents_spans_become_a_run_that_mocks_to_the_same_results() {
    require_peers();
    let requirements = agents_dir().join("requirements.txt");
    let out = Command::new("python3")
        .args([
            "-c",
            "import agents, openinference.instrumentation.openai_agents",
        ])
        .current_dir(std::env::temp_dir())
        .output()
        .expect("python3 runs");
    assert!(
        out.status.success(),
        "the OpenAI Agents SDK or OpenInference's instrumentation of it is missing: install \
         them with `pip install -r {}` ({})",
        requirements.display(),
        String::from_utf8_lossy(&out.stderr).trim()
    );
    let dir = tempfile::tempdir().unwrap();
    let (archive, config) = (dir.path().join("archive"), dir.path().join("config"));
    let mut agent = Command::new("python3");
    agent.arg(agents_dir().join("openai_agents_agent.py"));
    let said = collect_agent(&archive, &config, agent);
    assert!(said.contains("1 run(s) written"), "{said}");
    let (run, facts) = tape_facts(&archive, &config);
    assert_eq!(facts[0]["data"]["producer"]["name"], "agents-app");
    assert_eq!(
        facts[0]["data"]["labels"]["gen_ai.agent.name"],
        "weather-agent"
    );
    assert_eq!(facts.last().unwrap()["data"]["status"], "completed");
    let mut calls = calls(&facts);
    let agent_call = calls.remove(0);
    assert_eq!(agent_call.0, "agent:weather-agent");
    assert!(agent_call.2.is_null(), "the agent is the run's own call");
    // Started together: compared by name.
    calls.sort_by(|a, b| a.0.cmp(&b.0));
    let seen: Vec<(&str, &Value, &str)> = calls
        .iter()
        .map(|(tool, _, parent, args, outcome)| {
            assert_eq!(parent, &json!(agent_call.1), "{tool} beneath the agent");
            (tool.as_str(), args, outcome["status"].as_str().unwrap())
        })
        .collect();
    assert_eq!(
        seen,
        [
            ("add", &json!({"a": 2, "b": 3}), "ok"),
            ("explode", &json!({"why": "test"}), "error"),
            ("get_weather", &json!({"city": "Paris"}), "ok"),
        ]
    );
    assert_eq!(
        calls[0].4["result"],
        json!(5),
        "as the framework recorded it (an integer attribute)"
    );
    assert!(
        calls[1].4["error"]
            .as_str()
            .unwrap()
            .starts_with("Error running tool"),
        "{}",
        calls[1].4
    );
    let weather = calls[2].4["result"].as_str().unwrap();
    assert_eq!(
        reel::marker::strip_tags(weather),
        "sunny in Paris (key [REDACTED])",
        "the key scrubbed"
    );

    // The agent's tools are the run's: the mock answers each as recorded.
    let asked: Vec<Call> = calls
        .iter()
        .map(|c| {
            (
                c.0.clone(),
                c.1.clone(),
                Value::Null,
                c.3.clone(),
                c.4.clone(),
            )
        })
        .collect();
    let report = mock(&archive, &config, &run, &asked);
    let text = |s: &str, error: bool| json!({"isError": error, "text": [s]});
    assert_eq!(
        report["answers"],
        json!([
            text("5", false),
            text(
                "An error occurred while running the tool. Please try again.",
                true
            ),
            text(weather, false),
        ])
    );
    // Listed as the tool spans defined them (tool.description and
    // tool.parameters); the agent is not a tool.
    let tools = report["tools"].as_array().unwrap();
    let listed: Vec<(&str, &str, &Value)> = tools
        .iter()
        .map(|t| {
            (
                t["name"].as_str().unwrap(),
                t["description"].as_str().unwrap(),
                &t["inputSchema"]["required"],
            )
        })
        .collect();
    assert_eq!(
        listed,
        [
            ("add", "Adds two numbers.", &json!(["a", "b"])),
            ("explode", "Always fails.", &json!(["why"])),
            ("get_weather", "The weather of a city.", &json!(["city"])),
        ]
    );
    assert_eq!(
        tools[0]["inputSchema"]["properties"]["a"]["type"],
        "integer"
    );
}
