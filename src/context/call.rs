//! What a tool knows about its call: ids, input, spec, identity, session,
//! client and platform.

use super::*;

/// The AI platform making a request (seed 004's `AIPlatformType`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Platform {
    /// `openai`.
    OpenAi,
    /// `claude`.
    Claude,
    /// `gemini`.
    Gemini,
    /// `langchain`.
    LangChain,
    /// `vercel-ai`.
    VercelAi,
    /// `unknown`.
    Unknown,
}

impl Platform {
    /// The seed's name: `openai`, `claude`, `gemini`, `langchain`,
    /// `vercel-ai` or `unknown`.
    pub fn as_str(self) -> &'static str {
        match self {
            Platform::OpenAi => "openai",
            Platform::Claude => "claude",
            Platform::Gemini => "gemini",
            Platform::LangChain => "langchain",
            Platform::VercelAi => "vercel-ai",
            Platform::Unknown => "unknown",
        }
    }

    /// The platform of a seed name (any case); anything else is
    /// [`Platform::Unknown`].
    pub fn parse(name: &str) -> Platform {
        [
            Platform::OpenAi,
            Platform::Claude,
            Platform::Gemini,
            Platform::LangChain,
            Platform::VercelAi,
        ]
        .into_iter()
        .find(|p| p.as_str().eq_ignore_ascii_case(name.trim()))
        .unwrap_or(Platform::Unknown)
    }

    /// Detects the platform from MCP `clientInfo`. The rule: the client's
    /// name, then its title, lower-cased, is looked up in this table, first
    /// match wins; no client info, or no match, is `unknown`.
    ///
    /// | the name or title contains | platform |
    /// |---|---|
    /// | `openai`, `chatgpt`, `codex` | `openai` |
    /// | `claude`, `anthropic` | `claude` |
    /// | `gemini`, `google` | `gemini` |
    /// | `langchain`, `langgraph` | `langchain` |
    /// | `vercel`, `ai-sdk` | `vercel-ai` |
    ///
    /// ```
    /// use reel::context::Platform;
    /// use reel::fact::ClientInfo;
    /// let client = |name: &str| ClientInfo { name: name.into(), version: None, title: None };
    /// assert_eq!(Platform::detect(Some(&client("Claude Desktop"))), Platform::Claude);
    /// assert_eq!(Platform::detect(Some(&client("openai-mcp"))), Platform::OpenAi);
    /// assert_eq!(Platform::detect(Some(&client("@ai-sdk/mcp"))), Platform::VercelAi);
    /// assert_eq!(Platform::detect(Some(&client("my-cli"))), Platform::Unknown);
    /// assert_eq!(Platform::detect(None), Platform::Unknown);
    /// ```
    pub fn detect(client: Option<&ClientInfo>) -> Platform {
        const TABLE: &[(&str, Platform)] = &[
            ("openai", Platform::OpenAi),
            ("chatgpt", Platform::OpenAi),
            ("codex", Platform::OpenAi),
            ("claude", Platform::Claude),
            ("anthropic", Platform::Claude),
            ("gemini", Platform::Gemini),
            ("google", Platform::Gemini),
            ("langchain", Platform::LangChain),
            ("langgraph", Platform::LangChain),
            ("vercel", Platform::VercelAi),
            ("ai-sdk", Platform::VercelAi),
        ];
        let Some(client) = client else {
            return Platform::Unknown;
        };
        for text in std::iter::once(&client.name).chain(client.title.as_ref()) {
            let text = text.to_lowercase();
            if let Some((_, p)) = TABLE.iter().find(|(needle, _)| text.contains(needle)) {
                return *p;
            }
        }
        Platform::Unknown
    }
}

impl fmt::Display for Platform {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl From<Platform> for String {
    fn from(p: Platform) -> String {
        p.as_str().into()
    }
}

impl ToolContext {
    /// The run this call belongs to; `None` for a call outside any run
    /// (seed 000: `runId` is absent where there is no run, as for a call
    /// served over MCP).
    pub fn run_id(&self) -> Option<&str> {
        self.inner.info.home.run_id()
    }

    /// Where the call belongs: a run, or no run (with the key the archive
    /// keeps it under).
    pub fn home(&self) -> &Home {
        &self.inner.info.home
    }

    /// The tool's metadata (seed 004's `metadata`, which every tool has):
    /// its spec as on the record ([`ToolContext::spec`]) when it declared
    /// one; for a tool without a spec, minimal metadata derived from the
    /// call: its name, its id (when it differs), its mode, and an input
    /// schema that takes any object; nothing else is claimed.
    pub fn metadata(&self) -> std::borrow::Cow<'_, ToolSpec> {
        match self.spec() {
            Some(spec) => std::borrow::Cow::Borrowed(spec),
            None => std::borrow::Cow::Owned(ToolSpec {
                name: self.tool_name().to_owned(),
                id: (self.tool_id() != self.tool_name()).then(|| self.tool_id().to_owned()),
                title: None,
                description: None,
                annotations: None,
                input_schema: serde_json::json!({ "type": "object" }),
                output_schema: None,
                mode: self.mode(),
                needs: Vec::new(),
                wants: Vec::new(),
            }),
        }
    }

    /// The parsed, validated input as recorded in `call.started` (after
    /// the spec's wants were resolved into it), as JSON.
    pub fn input_json(&self) -> &Value {
        &self.inner.info.started.args
    }

    /// The input as `T` (seed 004's `input`):
    /// [`ContextError::InputType`] when it does not fit `T`.
    pub fn input<T: DeserializeOwned>(&self) -> Result<T, ContextError> {
        serde_json::from_value(self.input_json().clone()).map_err(|e| ContextError::InputType {
            tool: self.tool_name().into(),
            type_name: std::any::type_name::<T>(),
            detail: e.to_string(),
        })
    }

    /// The history of the input, oldest first (seed 004's
    /// `inputHistory`). A tool cannot change its input here, so the
    /// history is the recorded input alone.
    pub fn input_history(&self) -> Vec<Value> {
        vec![self.input_json().clone()]
    }

    /// The protocol the call came over, e.g. `"mcp"`, as recorded.
    pub fn protocol(&self) -> Option<&str> {
        self.inner.info.started.protocol.as_deref()
    }

    /// The call that dispatched this one, when it is a child call.
    pub fn parent_call(&self) -> Option<&str> {
        self.inner.info.started.parent_call.as_deref()
    }

    /// The client that made the request (name, version, title), as
    /// recorded; `None` when the host gave none.
    pub fn client_info(&self) -> Option<&ClientInfo> {
        self.inner.info.started.client_info.as_ref()
    }

    /// The AI platform making the request (seed 004's `platform`): the
    /// host's, when it set one on the call (a value outside the list is
    /// [`Platform::Unknown`]), else detected from the recorded client info
    /// by [`Platform::detect`]. Replay gives the same from the record.
    pub fn platform(&self) -> Platform {
        match self.inner.info.started.platform.as_deref() {
            Some(p) => Platform::parse(p),
            None => Platform::detect(self.client_info()),
        }
    }

    /// The hosting session, when bound to one (caller data, not identity).
    pub fn session_id(&self) -> Option<&str> {
        self.inner.info.session_id.as_deref()
    }

    /// The identity the caller supplied; `None` when the caller gave none.
    pub fn identity(&self) -> Option<&Identity> {
        self.inner.info.identity.as_ref()
    }

    /// The call's id **within its stream** (`c1`, `c2`, ... in a run).
    ///
    /// Not unique beyond that stream: every call outside any run heads a
    /// stream of its own, so behind the MCP door (where each `tools/call`
    /// is a call outside any run) every call is `c1`. To tell calls apart
    /// across streams (a key of your own, a receipt, a log line), use
    /// [`ToolContext::invocation_id`], unique per invocation, or the pair
    /// ([`ToolContext::home`], `call_id`).
    pub fn call_id(&self) -> &str {
        &self.inner.info.started.call_id
    }

    /// The tool's name.
    pub fn tool_name(&self) -> &str {
        &self.inner.info.started.tool_name
    }

    /// The tool's id (its name when no id was given).
    pub fn tool_id(&self) -> &str {
        let s = &self.inner.info.started;
        s.tool_id.as_deref().unwrap_or(&s.tool_name)
    }

    /// Everything `call.started` recorded about this call.
    pub fn call(&self) -> &CallStarted {
        &self.inner.info.started
    }

    /// The opaque invocation id shared by this call's `call.started` and
    /// `call.ended` and the host's receipts: unique per invocation across
    /// runs and doors (128 random bits, or the host's own), unlike
    /// [`ToolContext::call_id`]. Always present: the host
    /// generates one when it sets none; a record made before invocation ids
    /// were always present has none, and its call id stands in.
    pub fn invocation_id(&self) -> &str {
        let s = &self.inner.info.started;
        s.invocation_id.as_deref().unwrap_or(&s.call_id)
    }

    /// Sync or async: whether the registry (or host) accepted a synchronous
    /// or an asynchronous function for this tool.
    pub fn mode(&self) -> CallMode {
        self.inner.info.started.mode
    }

    /// The tool's spec, when it declared one (as on the record).
    pub fn spec(&self) -> Option<&ToolSpec> {
        self.inner.info.started.spec.as_deref()
    }

    /// The diagnostic scope of this invocation: present when the call is
    /// recorded (and in replay, with the record's values); `None` in a
    /// context built without recording.
    pub fn diagnostics(&self) -> Option<&Diagnostics> {
        self.inner.info.diagnostics.as_ref()
    }

    /// Iteration of the agent loop.
    pub fn iteration(&self) -> u32 {
        self.inner.info.started.iteration
    }

    /// Claim tickets of resolved wanted artifacts; `None` when none.
    pub fn wanted(&self) -> Option<&BTreeMap<String, ArtifactMeta>> {
        self.inner.info.started.wanted.as_ref()
    }

    /// Teardown scopes this host honours; empty means none ever fires.
    pub fn teardown_scopes(&self) -> &[TeardownScope] {
        &self.inner.info.teardown_scopes
    }

    // ---- cancellation -------------------------------------------------------
}
