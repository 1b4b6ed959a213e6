//! The walk over every field of every fact kind: each field is a JSON
//! value, a free-text string, or an identifier left alone, named once here
//! so a field added later does not compile until it is placed.

use super::*;

/// The fields of a fact, by what they hold. [`walk_fields`] calls these
/// for every string-bearing field of a fact.
pub(super) trait Fields {
    /// A free-text or name field.
    fn text(&mut self, text: &mut String);
    /// A JSON field (payload, args, result, ...).
    fn json(&mut self, value: &mut Value);
    /// Run labels: keys and values are strings.
    fn labels(&mut self, labels: &mut BTreeMap<String, String>);
    /// The keys of a map whose keys are names (the values are walked apart).
    fn keys<V>(&mut self, map: &mut BTreeMap<String, V>);
}

pub(super) fn opt_text(f: &mut impl Fields, text: &mut Option<String>) {
    if let Some(t) = text {
        f.text(t);
    }
}

pub(super) fn meta_fields(f: &mut impl Fields, meta: &mut ArtifactMeta) {
    let ArtifactMeta {
        id,
        // A content address: scrubbing it would break the reference.
        digest: _,
        size: _,
        media_type,
        // The caller's identity and the run and call ids: the host's
        // identifiers, not a tool's text.
        scope: _,
        origin: _,
    } = meta;
    f.text(id);
    f.text(media_type);
}

/// A tool spec is the host's declaration: its texts are scrubbed of known
/// secrets like any other, but its schemas only in their string values, never
/// by key name (a schema's property named `token` is a name, not a secret,
/// and redacting it would destroy the schema).
pub(super) fn spec_fields(f: &mut impl Fields, spec: &mut reel_core::spec::ToolSpec) {
    let reel_core::spec::ToolSpec {
        name,
        id,
        title,
        description,
        annotations: _,
        input_schema,
        output_schema,
        mode: _,
        needs,
        wants,
    } = spec;
    f.text(name);
    opt_text(f, id);
    opt_text(f, title);
    opt_text(f, description);
    schema_strings(f, input_schema);
    if let Some(schema) = output_schema {
        schema_strings(f, schema);
    }
    for need in needs {
        f.text(need);
    }
    for want in wants {
        f.text(want);
    }
}

pub(super) fn schema_strings(f: &mut impl Fields, value: &mut Value) {
    match value {
        Value::String(s) => f.text(s),
        Value::Array(items) => items.iter_mut().for_each(|v| schema_strings(f, v)),
        Value::Object(members) => {
            // Property names are scrubbed of known secrets too (as text: a
            // name like `token` is kept); a name that scrubs into another
            // is kept apart, never merged.
            let old = std::mem::take(members);
            for (mut key, mut v) in old {
                f.text(&mut key);
                schema_strings(f, &mut v);
                let mut unique = key.clone();
                let mut n = 2;
                while members.contains_key(&unique) {
                    unique = format!("{key} #{n}");
                    n += 1;
                }
                members.insert(unique, v);
            }
        }
        _ => {}
    }
}

/// Calls `f` for every string-bearing field of a fact. Every field of every
/// kind is named here (no `..`): a field added to the catalogue does not
/// compile until it is either walked or named as left alone, with the
/// reason. What is left alone is the identifiers the host chooses (run and
/// session ids, the identity) or reel assigns or derives (call ids, digests,
/// origins, key hashes, fingerprints), none of which a tool writes.
pub(super) fn walk_fields(kind: &mut FactKind, f: &mut impl Fields) {
    match kind {
        FactKind::RunStarted(RunStarted {
            run_id: _,
            session_id: _,
            identity: _,
            producer: Producer { name, version },
            labels,
            teardown_scopes: _,
        }) => {
            f.text(name);
            f.text(version);
            f.labels(labels);
        }
        FactKind::CallStarted(CallStarted {
            call_id: _,
            tool_name,
            tool_id,
            parent_call: _,
            iteration: _,
            invocation_id,
            mode: _,
            protocol,
            platform,
            client_info,
            args,
            wanted,
            attached: _,
            spec,
            dispatch_tools,
            outside_run,
        }) => {
            if let Some(outside) = outside_run {
                // The key is reel's; the session and identity are the
                // host's identifiers, left alone as in `run.started`.
                let OutsideRun {
                    key: _,
                    session_id: _,
                    identity: _,
                    producer: Producer { name, version },
                    labels,
                    teardown_scopes: _,
                } = &mut **outside;
                f.text(name);
                f.text(version);
                f.labels(labels);
            }
            if let Some(spec) = spec {
                spec_fields(f, spec);
            }
            dispatch_tools.iter_mut().flatten().for_each(|t| f.text(t));
            f.text(tool_name);
            opt_text(f, tool_id);
            opt_text(f, invocation_id);
            opt_text(f, protocol);
            opt_text(f, platform);
            if let Some(ClientInfo {
                name,
                version,
                title,
            }) = client_info
            {
                f.text(name);
                opt_text(f, version);
                opt_text(f, title);
            }
            f.json(args);
            if let Some(wanted) = wanted {
                f.keys(wanted);
                for meta in wanted.values_mut() {
                    meta_fields(f, meta);
                }
            }
        }
        FactKind::CredentialRequested(CredentialRequested {
            need,
            mode: _,
            kind,
        }) => {
            f.text(need);
            opt_text(f, kind);
        }
        FactKind::CredentialResolved(CredentialResolved {
            need,
            mode: _,
            kind,
            fingerprint: _,
            expires_at: _,
        }) => {
            f.text(need);
            opt_text(f, kind);
        }
        FactKind::CredentialFailed(CredentialFailed {
            need,
            mode: _,
            reason,
        })
        | FactKind::CredentialRefused(CredentialRefused {
            need,
            mode: _,
            reason,
        }) => {
            f.text(need);
            f.text(reason);
        }
        FactKind::ArtifactPut(ArtifactPut { meta }) => meta_fields(f, meta),
        FactKind::ArtifactGet(ArtifactGet { id, meta }) => {
            f.text(id);
            if let Some(meta) = meta {
                meta_fields(f, meta);
            }
        }
        FactKind::ArtifactRefused(ArtifactRefused { op: _, id, reason }) => {
            opt_text(f, id);
            f.text(reason);
        }
        FactKind::Progress(Progress {
            payload,
            count: _,
            delivered: _,
        }) => f.json(payload),
        FactKind::ProgressDropped(ProgressDropped { count: _ }) => {}
        // Written by the tripwire itself: names and a pointer, no value.
        FactKind::RedactionTripped(RedactionTripped {
            point,
            fact,
            field,
            encoding,
            rule,
        }) => {
            f.text(point);
            f.text(fact);
            f.text(field);
            f.text(encoding);
            f.text(rule);
        }
        FactKind::Log(Log {
            level: _,
            logger,
            subflow,
            data,
            delivered: _,
            in_flight,
        }) => {
            opt_text(f, logger);
            opt_text(f, subflow);
            f.json(data);
            for call in in_flight {
                f.text(call);
            }
        }
        FactKind::ElicitRequested(ElicitRequested {
            message,
            schema,
            mode: _,
            ttl_ms: _,
            url,
            elicitation_id,
        }) => {
            f.text(message);
            f.json(schema);
            opt_text(f, url);
            opt_text(f, elicitation_id);
        }
        FactKind::ElicitRefused(ElicitRefused {
            message,
            mode: _,
            reason,
        }) => {
            f.text(message);
            f.text(reason);
        }
        FactKind::ElicitAnswered(ElicitAnswered {
            outcome,
            validation_errors,
            pre_resolved: _,
        }) => {
            match outcome {
                ElicitOutcome::Accept { content } => f.json(content),
                ElicitOutcome::Error { message } => f.text(message),
                ElicitOutcome::Decline | ElicitOutcome::Cancel | ElicitOutcome::Timeout => {}
            }
            validation_errors.iter_mut().for_each(|e| f.text(e));
        }
        FactKind::TeardownRegistered(TeardownRegistered {
            scope: _,
            key_hash: _,
            first: _,
            registrations: _,
            registered_at: _,
        }) => {}
        FactKind::TeardownRefused(TeardownRefused {
            scope: _,
            key_hash: _,
            honoured: _,
            reason,
        }) => f.text(reason),
        FactKind::TeardownRan(TeardownRan {
            scope: _,
            key_hash: _,
            outcome,
            duration_ns: _,
            registrations: _,
            last_registered_at: _,
        }) => match outcome {
            TeardownOutcome::Error { message } => f.text(message),
            TeardownOutcome::Ok | TeardownOutcome::TimedOut => {}
        },
        FactKind::Effect(Effect {
            name,
            request,
            outcome,
        }) => {
            f.text(name);
            f.json(request);
            match outcome {
                EffectOutcome::Ok(value) => f.json(value),
                EffectOutcome::Err(message) => f.text(message),
            }
        }
        FactKind::Clock(Clock { unix_nanos: _ }) | FactKind::Random(Random { value: _ }) => {}
        FactKind::CancelRequested(CancelRequested { reason }) => opt_text(f, reason),
        FactKind::CallOutput(CallOutput { value, stage, note }) => {
            f.json(value);
            opt_text(f, stage);
            opt_text(f, note);
        }
        FactKind::CallEnded(CallEnded {
            outcome,
            duration_ns: _,
            invocation_id,
        }) => {
            opt_text(f, invocation_id);
            match outcome {
                CallOutcome::Ok { result } => f.json(result),
                CallOutcome::Error { error, result } => {
                    f.text(error);
                    if let Some(result) = result {
                        f.json(result);
                    }
                }
                CallOutcome::Aborted { reason } => opt_text(f, reason),
            }
        }
        FactKind::RunEnded(RunEnded { status: _ }) => {}
        FactKind::ModelCalled(ModelCalled {
            operation,
            provider,
            model,
            response_model,
            input_tokens: _,
            output_tokens: _,
            finish_reasons,
            duration_ns: _,
            error,
            input,
            output,
            tool_definitions,
        }) => {
            f.text(operation);
            opt_text(f, provider);
            opt_text(f, model);
            opt_text(f, response_model);
            finish_reasons.iter_mut().for_each(|r| f.text(r));
            opt_text(f, error);
            for value in [input, output, tool_definitions].into_iter().flatten() {
                f.json(value);
            }
        }
        // The kind's name is the writer's, not data.
        FactKind::Unknown { kind: _, data } => f.json(data),
    }
}

/// Pass 1: secret-named members and labels are replaced and learned.
pub(super) struct MarkPass<'a> {
    pub(super) redactor: &'a Redactor,
    pub(super) secrets: &'a mut KnownSecrets,
    /// Some JSON field nests past [`MAX_JSON_DEPTH`]: it is capped after
    /// redaction.
    pub(super) deep: bool,
}

impl Fields for MarkPass<'_> {
    fn text(&mut self, text: &mut String) {
        super::learn_prefixed(text, self.secrets);
    }

    fn json(&mut self, value: &mut Value) {
        self.deep |= self.redactor.mark_json_at(value, self.secrets, 0);
    }

    fn labels(&mut self, labels: &mut BTreeMap<String, String>) {
        for (k, v) in labels.iter_mut() {
            if self.redactor.is_secret_key(k) {
                let marker = self
                    .redactor
                    .hidden(&Value::String(v.clone()), self.secrets);
                self.secrets.learn_str(v, known::Text::String);
                *v = marker;
            }
        }
    }

    fn keys<V>(&mut self, _: &mut BTreeMap<String, V>) {}
}
