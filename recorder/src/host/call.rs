//! [`CallBuilder`]: what a call gets (providers, needs, services, a
//! spec) and invoking it; [`Canceller`].

use std::collections::BTreeMap;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use futures::FutureExt;
use reel::context::*;
use reel::fact::*;
use reel::lock::read;
use reel::spec::{resolve_wants, ToolSpec};
use reel::tools::{run_blocking, Tool, Tools};
use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::Value;

use crate::providers::{
    ArtifactStore, CredentialProvider, Elicitor, LogListener, ProgressListener,
};

use super::admit::{admit, head_outside_stream};
use super::backend::{LiveBackend, Providers};
use super::run::{new_invocation_id, Caller, Run};
use super::teardown::Teardowns;

/// A call about to be made. Attach what the tool may use, then `invoke`.
pub struct CallBuilder {
    pub(super) run: Run,
    /// Set for a call outside any run: who calls.
    pub(super) outside: Option<Caller>,
    pub(super) started: CallStarted,
    pub(super) providers: Providers,
    pub(super) needs: Vec<CredentialNeed>,
    pub(super) cancel: CancelHandle,
    pub(super) services: Services,
    /// The host chose the call id ([`CallBuilder::call_id`]): it is
    /// claimed when the call is invoked (a generated one is reserved when
    /// the call is prepared).
    pub(super) host_id: bool,
    /// The host's own token for this call ([`CallBuilder::cancellation`]).
    pub(super) host_cancel: Option<tokio_util::sync::CancellationToken>,
    /// The host's receipt ([`CallBuilder::receipt`]).
    pub(super) receipt: Option<Receipt>,
}

/// A host's receipt hook: a value computed from the context and the
/// result once the tool returned ([`CallBuilder::receipt`]).
pub(super) type Receipt = Box<dyn FnOnce(&ToolContext, &Result<Value, ToolError>) -> Value + Send>;

/// Cancels one call from the host; usable before, during and after it.
#[derive(Clone)]
pub struct Canceller {
    pub(super) run: Run,
    pub(super) call_id: String,
    pub(super) handle: CancelHandle,
}

impl Canceller {
    /// Files `cancel.requested` (also after the call ended: recorded, nothing
    /// overwritten) and trips the call's cancellation token.
    pub fn cancel(&self, reason: Option<&str>) {
        self.run.emit(
            Some(&self.call_id),
            FactKind::CancelRequested(CancelRequested {
                reason: reason.map(str::to_owned),
            }),
        );
        self.handle.cancel(reason.map(str::to_owned));
    }

    /// The id of the call it cancels.
    pub fn call_id(&self) -> &str {
        &self.call_id
    }
}

macro_rules! setter {
    ($(#[$doc:meta])* $name:ident, $field:ident: $ty:ty) => {
        $(#[$doc])*
        pub fn $name(mut self, value: impl Into<$ty>) -> CallBuilder {
            self.started.$field = Some(value.into());
            self
        }
    };
}

impl CallBuilder {
    /// Overrides the call id (default: `c1`, `c2`, ... per run, skipping
    /// the ids a host chose). A call id is unique within its run (seed 000:
    /// `toolCallId`): invoking a call whose id the run holds already (a
    /// call started with it, or prepared with it as its generated id) is
    /// refused before anything of it is recorded, and the tool does not
    /// run.
    pub fn call_id(mut self, id: impl Into<String>) -> CallBuilder {
        if !self.host_id {
            self.run.release_call_id(&self.started.call_id);
        }
        self.host_id = true;
        self.started.call_id = id.into();
        self
    }

    setter!(
        /// The tool's id, when it differs from its name.
        tool_id, tool_id: String);
    setter!(
        /// The opaque invocation id shared with the host's receipts
        /// (default: a generated one, see [`CallBuilder::invocation`]).
        invocation_id, invocation_id: String);
    setter!(
        /// The protocol the call came over, e.g. `"mcp"`.
        protocol, protocol: String);
    setter!(
        /// The detected AI platform, e.g. `"claude"`.
        platform, platform: String);
    setter!(
        /// The client that made the request.
        client_info, client_info: ClientInfo);
    setter!(
        /// Claim tickets of wanted artifacts the host resolved itself (the
        /// data is already in the args), added to those the recorder
        /// resolves from the spec. Seed 000: `wanted` is present only when
        /// the tool declared wants and at least one resolved, so every
        /// name must be a want of the call's spec ([`CallBuilder::spec`],
        /// or the registered tool's): a call naming another is refused
        /// when invoked (the tool does not run, nothing is recorded), and
        /// an empty map is no `wanted` at all.
        wanted, wanted: BTreeMap<String, ArtifactMeta>);

    /// The host's own cancellation token for this one call: when it is
    /// cancelled, the call is, as by [`Canceller::cancel`] with no reason
    /// (`cancel.requested` on the record). The call's own cancellation
    /// (its [`Canceller`], its run's) never trips it: other work may
    /// share it. Watched on the tokio runtime the call is invoked on,
    /// until the tool returns.
    pub fn cancellation(mut self, token: tokio_util::sync::CancellationToken) -> CallBuilder {
        self.host_cancel = Some(token);
        self
    }

    /// The host's receipt (agent-core's `receipt`): once the tool has
    /// returned, `receipt` computes a value from the context and the
    /// result, and it is filed as the call's `call.output` of stage
    /// [`RECEIPT_STAGE`](reel::marker::RECEIPT_STAGE), before `call.ended`.
    /// A host fact: replay puts the recorded one back in the timeline and
    /// does not call the hook.
    pub fn receipt(
        mut self,
        receipt: impl FnOnce(&ToolContext, &Result<Value, ToolError>) -> Value + Send + 'static,
    ) -> CallBuilder {
        self.receipt = Some(Box::new(receipt));
        self
    }

    /// The iteration of the agent loop.
    pub fn iteration(mut self, n: u32) -> CallBuilder {
        self.started.iteration = n;
        self
    }

    /// The tool's spec, recorded in `call.started`: its wants are resolved
    /// and its input validated before the tool runs, and its needs are
    /// resolved along with the call's own [`CallBuilder::needs`]. Its mode
    /// becomes that of the function invoked. The spec's name must be the
    /// called tool's.
    pub fn spec(mut self, spec: ToolSpec) -> CallBuilder {
        self.started.spec = Some(Box::new(spec));
        self
    }

    /// Attaches a credential provider.
    pub fn credentials(mut self, provider: Arc<dyn CredentialProvider>) -> CallBuilder {
        self.providers.credentials = Some(provider);
        self
    }

    /// Declares a credential need for this call, in addition to the spec's
    /// needs (a need declared by both is resolved once), resolved before the
    /// tool runs; if it fails, the tool does not run.
    pub fn needs(mut self, need: impl Into<String>) -> CallBuilder {
        self.needs.push(CredentialNeed::new(need));
        self
    }

    /// Attaches an artifact store.
    pub fn artifacts(mut self, store: Arc<dyn ArtifactStore>) -> CallBuilder {
        self.providers.artifacts = Some(store);
        self
    }

    /// Attaches an elicitor.
    pub fn elicitor(mut self, elicitor: Arc<dyn Elicitor>) -> CallBuilder {
        self.providers.elicitor = Some(elicitor);
        self
    }

    /// Attaches nested dispatch over these tools.
    pub fn dispatcher(mut self, tools: Tools) -> CallBuilder {
        self.providers.dispatcher = Some(tools);
        self
    }

    /// Registers a typed service the tool gets with `ctx.get::<T>()` (one
    /// per type; a later one of the same type replaces it), over the
    /// recorder's ([`Recorder::service`](crate::Recorder::service)): this one wins for its type. The
    /// children the call dispatches get the same services. Services are
    /// not recorded: a replay registers its own with
    /// `ReplayOptions::service`.
    pub fn service<T: Send + Sync + 'static>(mut self, service: Arc<T>) -> CallBuilder {
        self.services.insert(service);
        self
    }

    /// Attaches a listener for log notifications.
    pub fn listener(mut self, listener: Arc<dyn LogListener>) -> CallBuilder {
        self.providers.listener = Some(listener);
        self
    }

    /// Attaches a listener that sees each progress report as it is filed
    /// (an MCP server sends them as `notifications/progress`). Without one,
    /// a report is only recorded.
    pub fn progress_listener(mut self, listener: Arc<dyn ProgressListener>) -> CallBuilder {
        self.providers.progress = Some(listener);
        self
    }

    /// A handle that cancels this call.
    pub fn canceller(&self) -> Canceller {
        Canceller {
            run: self.run.clone(),
            call_id: self.started.call_id.clone(),
            handle: self.cancel.clone(),
        }
    }

    /// The call's id.
    pub fn id(&self) -> &str {
        &self.started.call_id
    }

    /// The key the archive keeps the call's stream under: the run's id, or
    /// for a call outside any run the key the recorder assigned it (`call-`
    /// and 32 hex digits), which `reel show` and `Archive::facts` take.
    pub fn key(&self) -> &str {
        self.run.id()
    }

    /// The call's invocation id: the host's, or the one generated for the
    /// call (`inv-` and 32 hex digits of OS-seeded randomness), for the
    /// host's receipts. It is on the call's `call.started` and `call.ended`.
    pub fn invocation(&self) -> &str {
        self.started.invocation_id.as_deref().unwrap_or_default()
    }

    /// Runs a typed tool and records the call. Without
    /// [`CallBuilder::spec`] the call has none: its input is not validated
    /// and its result not checked (see `Tools::register` for all a
    /// spec-less tool lacks).
    pub async fn invoke<A, O, F, Fut>(self, tool: F) -> Result<O, ToolError>
    where
        A: DeserializeOwned,
        O: Serialize + DeserializeOwned,
        F: FnOnce(ToolContext, A) -> Fut,
        Fut: Future<Output = Result<O, ToolError>>,
    {
        let tool_name = self.started.tool_name.clone();
        let value = self
            .invoke_with(CallMode::Async, move |ctx, args| async move {
                let args: A = serde_json::from_value(args).map_err(|e| ToolError::InvalidArgs {
                    tool: tool_name,
                    detail: e.to_string(),
                })?;
                let out = tool(ctx, args).await?;
                serde_json::to_value(out)
                    .map_err(|e| ToolError::msg(format!("the result does not serialise: {e}")))
            })
            .await?;
        serde_json::from_value(value)
            .map_err(|e| ToolError::msg(format!("the result does not deserialise: {e}")))
    }

    /// Runs a typed sync tool (a plain function, on a blocking thread) and
    /// records the call as `mode: sync`. It receives the same context as an
    /// async tool.
    pub async fn invoke_sync<A, O, F>(self, tool: F) -> Result<O, ToolError>
    where
        A: DeserializeOwned + Send + 'static,
        O: Serialize + DeserializeOwned + Send + 'static,
        F: FnOnce(ToolContext, A) -> Result<O, ToolError> + Send + 'static,
    {
        let tool_name = self.started.tool_name.clone();
        let value = self
            .invoke_with(CallMode::Sync, move |ctx, args| async move {
                let args: A = serde_json::from_value(args).map_err(|e| ToolError::InvalidArgs {
                    tool: tool_name,
                    detail: e.to_string(),
                })?;
                let out = run_blocking(move || tool(ctx, args)).await?;
                serde_json::to_value(out)
                    .map_err(|e| ToolError::msg(format!("the result does not serialise: {e}")))
            })
            .await?;
        serde_json::from_value(value)
            .map_err(|e| ToolError::msg(format!("the result does not deserialise: {e}")))
    }

    /// Runs a registered tool and records the call, with the tool's mode
    /// and (unless [`CallBuilder::spec`] set one) its spec.
    pub async fn invoke_erased(mut self, tool: &Tool) -> Result<Value, ToolError> {
        if self.started.spec.is_none() {
            self.started.spec = tool.spec().cloned().map(Box::new);
        }
        let tool = tool.clone();
        self.invoke_with(tool.mode(), move |ctx, args| tool.call(ctx, args))
            .await
    }

    /// Runs the tool of the call's name from `tools` (see
    /// [`CallBuilder::invoke_erased`]); a name `tools` does not have is
    /// recorded as a call that ends with [`ToolError::UnknownTool`].
    pub async fn invoke_tool(self, tools: &Tools) -> Result<Value, ToolError> {
        match tools.get(&self.started.tool_name) {
            Some(tool) => self.invoke_erased(tool).await,
            None => {
                let name = self.started.tool_name.clone();
                self.invoke_with(CallMode::Async, move |_, _| async move {
                    Err(ToolError::UnknownTool(name))
                })
                .await
            }
        }
    }

    pub(super) async fn invoke_with<F, Fut>(
        self,
        mode: CallMode,
        tool: F,
    ) -> Result<Value, ToolError>
    where
        F: FnOnce(ToolContext, Value) -> Fut,
        Fut: Future<Output = Result<Value, ToolError>>,
    {
        let run = self.run;
        let mut started = self.started;
        admit(&run, &mut started, self.host_id)?;
        let started_at = Instant::now();
        if let Some(caller) = self.outside {
            head_outside_stream(&run, caller, &mut started)?;
        }
        describe(
            &mut started,
            mode,
            &self.providers,
            run.inner.rec.config.content_logging,
        );
        let call_id = started.call_id.clone();
        // The call's own services over the recorder's.
        let services = self.services.over(&read(&run.inner.rec.services));
        let progress_key = run
            .inner
            .rec
            .queue
            .open_call(&run.inner.id, &Arc::from(call_id.as_str()));
        let backend = Arc::new(LiveBackend {
            run: run.clone(),
            progress_key,
            call_id: call_id.clone(),
            invocation_id: started.invocation_id.clone(),
            inherited: (
                started.iteration,
                started.protocol.clone(),
                started.platform.clone(),
                started.client_info.clone(),
            ),
            providers: self.providers,
            services: services.clone(),
            teardowns: Mutex::new(Teardowns::default()),
            dropped: Default::default(),
            cancel: self.cancel.clone(),
        });
        // Declared wants are resolved before call.started is filed: it
        // carries the data in its args and the tickets in `wanted`.
        if let Some(spec) = started.spec.take() {
            let resolved = resolve_wants(&spec, &mut started.args, &*backend).await;
            started.spec = Some(spec);
            if let Some(resolved) = resolved {
                started
                    .wanted
                    .get_or_insert_with(BTreeMap::new)
                    .extend(resolved);
            }
        }
        let args = started.args.clone();
        let parent = started.parent_call.clone();
        run.emit(Some(&call_id), FactKind::CallStarted(started.clone()));
        // A run-level cancel reaches the call from here on.
        run.call_started(&call_id, parent.as_deref(), &self.cancel);
        let info = CallInfo {
            home: run.home(),
            session_id: run.inner.session_id.clone(),
            identity: run.inner.identity.clone(),
            teardown_scopes: run.inner.teardown_scopes.clone(),
            diagnostics: Some(Diagnostics {
                run_id: run.home().run_id().map(str::to_owned),
                call_id: call_id.clone(),
                invocation_id: started
                    .invocation_id
                    .clone()
                    .unwrap_or_else(|| call_id.clone()),
                producer: run.inner.rec.config.producer.clone(),
            }),
            started,
        };
        let dyn_backend: Arc<dyn CallBackend> = backend.clone();

        // The host's token for this call, watched until the tool returns.
        let watch = self.host_cancel.and_then(|token| {
            watch_host_token(
                token,
                Canceller {
                    run: run.clone(),
                    call_id: call_id.clone(),
                    handle: self.cancel.clone(),
                },
            )
        });
        let receipt = self.receipt;
        // The input is validated and the declared needs are resolved
        // before the tool runs.
        let result = match before_tool(&info, &dyn_backend, &self.needs, &self.cancel).await {
            Err(err) => Err(err),
            Ok(declared) => {
                let ctx = ToolContext::new(info, dyn_backend, declared, &self.cancel)
                    .with_services(services);
                let handle = ctx.clone();
                match AssertUnwindSafe(tool(ctx, args)).catch_unwind().await {
                    Ok(result) => {
                        if let Some(w) = &watch {
                            w.abort();
                        }
                        let result = after_tool(&handle, result);
                        if let Some(receipt) = receipt {
                            file_receipt(&run, &call_id, receipt(&handle, &result));
                        }
                        result
                    }
                    Err(panic) => {
                        handle.close();
                        run.call_ended(&call_id);
                        let message = panic_message(&*panic);
                        // Unwinding on: whether the end was durable
                        // changes nothing for the panic.
                        let _ = backend
                            .finish(
                                started_at,
                                &Err(ToolError::msg(format!("the tool panicked: {message}"))),
                            )
                            .await;
                        std::panic::resume_unwind(panic);
                    }
                }
            }
        };
        if let Some(w) = watch {
            w.abort();
        }
        let recorded = backend.finish(started_at, &result).await;
        run.call_ended(&call_id);
        match (recorded, result) {
            // Call-boundary durability: a result is handed back only once
            // its facts are durable; the tool's own error says more.
            (Err(detail), Ok(_)) => Err(ContextError::NotRecorded { detail }.into()),
            (_, result) => result,
        }
    }
}

/// Watches the host's token for one call ([`CallBuilder::cancellation`])
/// on the current tokio runtime: its cancel cancels the call.
fn watch_host_token(
    token: tokio_util::sync::CancellationToken,
    canceller: Canceller,
) -> Option<tokio::task::JoinHandle<()>> {
    let runtime = tokio::runtime::Handle::try_current().ok()?;
    Some(runtime.spawn(async move {
        token.cancelled().await;
        canceller.cancel(None);
    }))
}

/// Files the host's receipt ([`CallBuilder::receipt`]) before the call's end.
fn file_receipt(run: &Run, call_id: &str, value: Value) {
    run.emit(
        Some(call_id),
        FactKind::CallOutput(CallOutput {
            value,
            stage: Some(reel::marker::RECEIPT_STAGE.to_owned()),
            note: None,
        }),
    );
}

/// Completes a call's `call.started` with how it runs: the mode that
/// accepted the function, the spec's tool id, the tools it may dispatch to
/// and what the host attached.
fn describe(
    started: &mut CallStarted,
    mode: CallMode,
    providers: &Providers,
    content_logging: bool,
) {
    // The mode is what accepted the function, never a label.
    started.mode = mode;
    if let Some(spec) = &mut started.spec {
        spec.mode = mode;
        if started.tool_id.is_none() {
            started.tool_id = spec.id.clone();
        }
    }
    started.dispatch_tools = providers
        .dispatcher
        .as_ref()
        .map(|tools| tools.names().map(str::to_owned).collect());
    started.attached = Some(Attached {
        credentials: providers.credentials.is_some(),
        artifacts: providers.artifacts.is_some(),
        elicitor: providers.elicitor.is_some(),
        dispatch: providers.dispatcher.is_some(),
        log_listener: providers.listener.is_some(),
        content_logging,
    });
}

/// Making a call in a run.
impl Run {
    /// Prepares a call of `tool` with `args`.
    pub fn call(&self, tool: &str, args: impl Serialize) -> CallBuilder {
        let call_id = self.generate_call_id();
        let args = serde_json::to_value(args)
            .unwrap_or_else(|e| serde_json::json!({ "unserialisable": e.to_string() }));
        CallBuilder {
            run: self.clone(),
            outside: None,
            started: CallStarted {
                call_id,
                tool_name: tool.into(),
                tool_id: None,
                parent_call: None,
                iteration: 0,
                invocation_id: Some(new_invocation_id()),
                mode: CallMode::Async,
                protocol: None,
                platform: None,
                client_info: None,
                args,
                wanted: None,
                attached: None,
                spec: None,
                dispatch_tools: None,
                outside_run: None,
            },
            providers: Providers::default(),
            needs: Vec::new(),
            cancel: CancelHandle::new(),
            services: Services::default(),
            host_id: false,
            host_cancel: None,
            receipt: None,
        }
    }
}
