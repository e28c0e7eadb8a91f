//! Tool executors: the HTTP endpoints that run approved calls under the run owner's identity (docs/design.md §9).
//!
//! The configuration is a TOML file named by `TOOLS_CONFIG`. An executor call never fails the decision: a timeout,
//! a refused connection, a non-2xx status (a redirect included: none is followed) or a malformed answer becomes the
//! `failed` result.
//!
//! Over 400 lines: the file's parsing and checks, the client and their tests belong to one configuration; the tests are
//! a third of it. The file also declares the worker's tools (`executor = "worker"`, `editable`, docs/design.md §15),
//! which are never sent.

use std::collections::HashMap;
use std::path::Path;
use std::time::{Duration, Instant};

use serde::Deserialize;
use serde_json::Value;
use uuid::Uuid;

use crate::domain::redact::TRUNCATION_MARK;
use crate::domain::results::{self, ToolResult};
use crate::domain::secret::Secret;
use crate::domain::transcript::{TOOL_NAME_RULE, is_valid_tool_name};
use crate::domain::vocabulary::{Effect, ExecutorKind};

/// The header that names the run's tenant (also the body's `tenant`): executors serve every tenant, and an
/// `owner_uid` means nothing without the tenant whose user it is.
pub const TENANT_HEADER: &str = "Approval-Resume-Tenant";

/// Answers larger than this many bytes are not read at all, whatever the content cap: the call is `failed`.
const HARD_BODY_LIMIT: usize = 16 * 1024 * 1024;

/// One tool's executor.
#[derive(Debug, Clone)]
pub struct ToolExecutor {
    pub url: String,
    pub timeout: Duration,
    pub effect: Effect,
    pub secret: Option<Secret>,
    pub enabled: bool,
    /// Executor content longer than this many characters is cut and marked.
    pub max_content_chars: usize,
}

/// What the configuration says of a tool besides its executor (docs/design.md §15): who runs it and whether a decider
/// may edit its arguments. Only tools the file configures otherwise than the defaults (`service`, editable) have one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ToolDeclaration {
    pub effect: Effect,
    pub executor: ExecutorKind,
    pub editable: bool,
}

/// All configured executors and the HTTP client they share.
#[derive(Debug, Clone)]
pub struct Executors {
    tools: HashMap<String, ToolExecutor>,
    /// Worker tools (which have no executor) and tools that may not be edited, as the file declares them.
    declarations: HashMap<String, ToolDeclaration>,
    client: reqwest::Client,
}

/// What an executor receives.
#[derive(Debug)]
pub struct ExecutorCall<'a> {
    pub run_id: Uuid,
    /// The tenant of the run, whose backend user `owner_uid` is.
    pub tenant: &'a str,
    pub call_id: &'a str,
    pub tool: &'a str,
    /// The JSON text the model produced; validated at registration to hold an object.
    pub arguments: &'a str,
    pub owner_uid: i64,
}

#[derive(Debug, thiserror::Error)]
pub enum ExecutorConfigError {
    #[error("TOOLS_CONFIG: cannot read {path}: {source}")]
    Read {
        path: String,
        source: std::io::Error,
    },
    #[error("TOOLS_CONFIG: {path}: {message}")]
    Parse { path: String, message: String },
    #[error("TOOLS_CONFIG: tool {tool:?}: {field}: {message}")]
    Invalid {
        tool: String,
        field: &'static str,
        message: String,
    },
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileConfig {
    #[serde(default)]
    tools: HashMap<String, FileTool>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileTool {
    /// Required for a tool the service runs; refused for a worker's tool, to which nothing is sent.
    url: Option<String>,
    #[serde(default = "default_timeout_ms")]
    timeout_ms: u64,
    effect: Effect,
    /// The name of an environment variable holding the bearer secret, so the file itself holds none.
    secret_env: Option<String>,
    #[serde(default = "default_enabled")]
    enabled: bool,
    #[serde(default = "default_max_content_chars")]
    max_content_chars: usize,
    #[serde(default)]
    executor: ExecutorKind,
    #[serde(default = "default_editable")]
    editable: bool,
}

fn default_editable() -> bool {
    true
}

fn default_timeout_ms() -> u64 {
    10_000
}
fn default_enabled() -> bool {
    true
}
fn default_max_content_chars() -> usize {
    65_536
}

#[derive(Debug, Deserialize)]
struct Answer {
    content: String,
    is_error: bool,
}

impl Executors {
    /// No executor at all: every approved call is `not_permitted`.
    pub fn none() -> Self {
        Self::from_tools(HashMap::new())
    }

    pub fn from_tools(tools: HashMap<String, ToolExecutor>) -> Self {
        Executors {
            tools,
            declarations: HashMap::new(),
            client: client(),
        }
    }

    /// These executors with the tools' declarations of who runs them and whether they may be edited.
    pub fn with_declarations(mut self, declarations: HashMap<String, ToolDeclaration>) -> Self {
        self.declarations = declarations;
        self
    }

    /// Reads and checks the TOML file; every error names the tool and the field. An `http://` executor with a
    /// `secret_env` is refused unless `allow_insecure_secrets` (EXECUTORS_ALLOW_INSECURE_SECRETS) says the network
    /// between the service and its executors is trusted: the secret would travel in clear.
    pub fn from_file(
        path: &Path,
        env: impl Fn(&str) -> Option<String>,
        allow_insecure_secrets: bool,
    ) -> Result<Self, ExecutorConfigError> {
        let shown = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|source| ExecutorConfigError::Read {
            path: shown.clone(),
            source,
        })?;
        let file: FileConfig =
            toml::from_str(&text).map_err(|error| ExecutorConfigError::Parse {
                path: shown,
                message: error.to_string(),
            })?;
        let mut tools = HashMap::new();
        let mut declarations = HashMap::new();
        for (name, tool) in file.tools {
            let invalid = |field, message: String| ExecutorConfigError::Invalid {
                tool: name.clone(),
                field,
                message,
            };
            if !is_valid_tool_name(&name) {
                return Err(invalid("name", format!("must match {TOOL_NAME_RULE}")));
            }
            let declaration = ToolDeclaration {
                effect: tool.effect,
                executor: tool.executor,
                editable: tool.editable,
            };
            if tool.executor == ExecutorKind::Worker {
                if tool.url.is_some() {
                    return Err(invalid(
                        "url",
                        "a worker's tool is run by the worker; nothing is sent to a url".into(),
                    ));
                }
                declarations.insert(name, declaration);
                continue;
            }
            let url = tool
                .url
                .ok_or_else(|| invalid("url", "required for a tool the service runs".into()))?;
            if !(url.starts_with("http://") || url.starts_with("https://")) {
                return Err(invalid("url", format!("{url:?} is not an http(s) URL")));
            }
            reqwest::Url::parse(&url).map_err(|error| invalid("url", error.to_string()))?;
            if tool.timeout_ms == 0 || tool.timeout_ms > 600_000 {
                return Err(invalid("timeout_ms", "must be between 1 and 600000".into()));
            }
            if tool.max_content_chars == 0 {
                return Err(invalid("max_content_chars", "must be at least 1".into()));
            }
            let secret = match tool.secret_env {
                Some(variable) => {
                    Some(Secret::new(env(&variable).ok_or_else(|| {
                        invalid("secret_env", format!("{variable} is not set"))
                    })?))
                }
                None => None,
            };
            if secret.is_some() && url.starts_with("http://") && !allow_insecure_secrets {
                return Err(invalid(
                    "secret_env",
                    "an http:// executor would receive the secret in clear: use https://, or set \
                     EXECUTORS_ALLOW_INSECURE_SECRETS=true if the network to it is trusted"
                        .into(),
                ));
            }
            if !tool.editable {
                declarations.insert(name.clone(), declaration);
            }
            let executor = ToolExecutor {
                url,
                timeout: Duration::from_millis(tool.timeout_ms),
                effect: tool.effect,
                secret,
                enabled: tool.enabled,
                max_content_chars: tool.max_content_chars,
            };
            tools.insert(name, executor);
        }
        Ok(Self::from_tools(tools).with_declarations(declarations))
    }

    /// The executor of a tool, if it is configured and enabled.
    pub fn enabled(&self, tool: &str) -> Option<&ToolExecutor> {
        self.tools.get(tool).filter(|executor| executor.enabled)
    }

    /// The effect the configuration declares for a tool, if it configures the tool.
    pub fn effect_of(&self, tool: &str) -> Option<Effect> {
        self.tools
            .get(tool)
            .map(|executor| executor.effect)
            .or_else(|| self.declarations.get(tool).map(|declared| declared.effect))
    }

    /// Who runs a tool's approved calls (docs/design.md §15): the run's own declaration wins over this configuration's,
    /// and a tool neither declares is the service's.
    pub fn executor_kind(&self, tool: &str, declared: Option<ExecutorKind>) -> ExecutorKind {
        declared
            .or_else(|| self.declarations.get(tool).map(|d| d.executor))
            .unwrap_or_default()
    }

    /// Whether a decider may edit a tool's arguments (docs/design.md §15): the run's declaration wins over this
    /// configuration's; editable unless one says otherwise.
    pub fn editable(&self, tool: &str, declared: Option<bool>) -> bool {
        declared
            .or_else(|| self.declarations.get(tool).map(|d| d.editable))
            .unwrap_or(true)
    }

    /// A tool's effect in a run (docs/design.md §2): `write` if the run declares it `write` or this configuration does,
    /// so a run can never turn a configured write into a read. Applied again wherever a stored call's effect is
    /// used, since the configuration may have made a tool `write` after the run was registered.
    pub fn effect(&self, tool: &str, declared: Option<Effect>) -> Effect {
        if declared == Some(Effect::Write) || self.effect_of(tool) == Some(Effect::Write) {
            Effect::Write
        } else {
            Effect::Read
        }
    }

    pub fn client(&self) -> &reqwest::Client {
        &self.client
    }

    /// The longest time one executor call may take.
    pub fn longest_timeout(&self) -> Duration {
        self.tools
            .values()
            .map(|executor| executor.timeout)
            .max()
            .unwrap_or_default()
    }
}

/// The client every executor call goes through. It follows no redirect: a 3xx would re-send the arguments, the
/// owner, the secret and the Idempotency-Key to wherever it points, so it is a non-2xx answer, the `failed` result.
fn client() -> reqwest::Client {
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap_or_else(|error| panic!("the executor HTTP client cannot be built: {error}"))
}

impl ToolExecutor {
    /// Sends one call; whatever happens becomes a tool result.
    pub async fn execute(&self, client: &reqwest::Client, call: &ExecutorCall<'_>) -> ToolResult {
        let started = Instant::now();
        let answer = self.send(client, call).await;
        let elapsed = started.elapsed();
        let elapsed_ms = elapsed.as_millis() as u64;
        match answer {
            Ok(answer) => {
                let content = cut(storable(answer.content), self.max_content_chars);
                let result = results::executed(call.call_id, call.tool, content, answer.is_error);
                crate::metrics::executor_call(call.tool, result.outcome.as_str(), elapsed);
                tracing::info!(
                    tool = call.tool,
                    outcome = result.outcome.as_str(),
                    elapsed_ms,
                    "executor answered"
                );
                result
            }
            Err(problem) => {
                tracing::warn!(
                    tool = call.tool,
                    problem,
                    elapsed_ms,
                    "executor call failed"
                );
                crate::metrics::executor_call(call.tool, "failed", elapsed);
                results::failed(call.call_id, call.tool)
            }
        }
    }

    async fn send(
        &self,
        client: &reqwest::Client,
        call: &ExecutorCall<'_>,
    ) -> Result<Answer, &'static str> {
        let arguments: Value =
            serde_json::from_str(call.arguments).map_err(|_| "arguments are not JSON")?;
        let body = serde_json::json!({
            "run_id": call.run_id,
            "tenant": call.tenant,
            "call_id": call.call_id,
            "tool": call.tool,
            "arguments": arguments,
            "owner_uid": call.owner_uid,
        });
        let mut request = client
            .post(&self.url)
            .timeout(self.timeout)
            .header(
                "Idempotency-Key",
                format!("{}:{}", call.run_id, call.call_id),
            )
            .header(TENANT_HEADER, call.tenant)
            .json(&body);
        if let Some(secret) = &self.secret {
            request = request.bearer_auth(secret.expose());
        }
        let mut response = request.send().await.map_err(|error| {
            if error.is_timeout() {
                "timeout"
            } else {
                "connection failed"
            }
        })?;
        if !response.status().is_success() {
            return Err("non-2xx status");
        }
        let mut body = Vec::new();
        while let Some(chunk) = response.chunk().await.map_err(|error| {
            if error.is_timeout() {
                "timeout"
            } else {
                "answer broken off"
            }
        })? {
            if body.len() + chunk.len() > HARD_BODY_LIMIT {
                return Err("answer over the hard size limit");
            }
            body.extend_from_slice(&chunk);
        }
        serde_json::from_slice(&body).map_err(|_| "malformed answer")
    }
}

/// Replaces U+0000, which Postgres cannot store in text, by U+FFFD: an executor's odd answer must not stop the
/// turn from being resumed.
fn storable(content: String) -> String {
    if content.contains('\0') {
        content.replace('\0', "\u{FFFD}")
    } else {
        content
    }
}

/// Cuts content over `max_chars` characters and marks the cut, so the model knows it saw only a part.
fn cut(content: String, max_chars: usize) -> String {
    match content.char_indices().nth(max_chars) {
        Some((byte_index, _)) => {
            let mut kept = content[..byte_index].to_owned();
            kept.push_str(TRUNCATION_MARK);
            kept
        }
        None => content,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_nul_character_in_content_is_replaced_so_postgres_can_store_it() {
        assert_eq!(storable("a\0b".into()), "a\u{FFFD}b");
        assert_eq!(storable("plain".into()), "plain");
    }

    #[test]
    fn content_within_the_cap_is_left_whole() {
        assert_eq!(cut("héllo".into(), 5), "héllo");
    }

    #[test]
    fn content_over_the_cap_is_cut_on_a_character_boundary_and_marked() {
        assert_eq!(cut("héllo".into(), 2), format!("hé{TRUNCATION_MARK}"));
    }

    #[test]
    fn a_config_error_names_the_tool_and_the_field() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("tools.toml");
        std::fs::write(
            &path,
            "[tools.send_mail]\nurl = \"ftp://x\"\neffect = \"write\"\n",
        )
        .unwrap();
        let error = Executors::from_file(&path, |_| None, false)
            .unwrap_err()
            .to_string();
        assert!(
            error.contains("\"send_mail\"") && error.contains("url"),
            "{error}"
        );
    }

    #[test]
    fn a_missing_secret_variable_is_refused_naming_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("tools.toml");
        std::fs::write(
            &path,
            "[tools.x]\nurl = \"http://127.0.0.1:1/\"\neffect = \"read\"\nsecret_env = \"X_SECRET\"\n",
        )
        .unwrap();
        let error = Executors::from_file(&path, |_| None, false)
            .unwrap_err()
            .to_string();
        assert!(
            error.contains("secret_env") && error.contains("X_SECRET"),
            "{error}"
        );
    }

    fn with_secret(url: &str, allow_insecure_secrets: bool) -> Result<Executors, String> {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("tools.toml");
        std::fs::write(
            &path,
            format!("[tools.x]\nurl = \"{url}\"\neffect = \"write\"\nsecret_env = \"X_SECRET\"\n"),
        )
        .unwrap();
        Executors::from_file(&path, |_| Some("s3cret".into()), allow_insecure_secrets)
            .map_err(|error| error.to_string())
    }

    #[test]
    fn an_http_executor_with_a_secret_is_refused_unless_the_network_is_trusted() {
        let error = with_secret("http://tools.internal:9000/x", false).unwrap_err();
        assert!(
            error.contains("\"x\"")
                && error.contains("secret_env")
                && error.contains("EXECUTORS_ALLOW_INSECURE_SECRETS"),
            "{error}"
        );
        assert!(with_secret("http://tools.internal:9000/x", true).is_ok());
        assert!(with_secret("https://tools.internal/x", false).is_ok());
    }

    #[test]
    fn a_valid_config_yields_enabled_and_disabled_tools() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("tools.toml");
        std::fs::write(
            &path,
            "[tools.a]\nurl = \"http://127.0.0.1:1/a\"\neffect = \"write\"\ntimeout_ms = 2000\n\
             [tools.b]\nurl = \"http://127.0.0.1:1/b\"\neffect = \"read\"\nenabled = false\n",
        )
        .unwrap();
        let executors = Executors::from_file(&path, |_| None, false).unwrap();
        assert!(executors.enabled("a").is_some());
        assert!(executors.enabled("b").is_none());
        assert_eq!(executors.effect_of("b"), Some(Effect::Read));
        assert_eq!(
            executors.longest_timeout(),
            Duration::from_secs(10),
            "b's timeout, 10 s by default"
        );
    }

    #[test]
    fn a_worker_tool_takes_no_url_and_a_run_declaration_wins_over_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("tools.toml");
        std::fs::write(
            &path,
            "[tools.w]\neffect = \"write\"\nexecutor = \"worker\"\neditable = false\n\
             [tools.s]\nurl = \"http://127.0.0.1:1/s\"\neffect = \"read\"\neditable = false\n",
        )
        .unwrap();
        let executors = Executors::from_file(&path, |_| None, false).unwrap();
        assert!(
            executors.enabled("w").is_none(),
            "nothing is sent for a worker's tool"
        );
        assert_eq!(executors.effect_of("w"), Some(Effect::Write));
        assert_eq!(executors.executor_kind("w", None), ExecutorKind::Worker);
        assert_eq!(
            executors.executor_kind("w", Some(ExecutorKind::Service)),
            ExecutorKind::Service
        );
        assert_eq!(executors.executor_kind("s", None), ExecutorKind::Service);
        assert!(!executors.editable("s", None) && executors.editable("s", Some(true)));
        assert!(executors.editable("other", None));

        std::fs::write(
            &path,
            "[tools.w]\nurl = \"http://127.0.0.1:1/w\"\neffect = \"write\"\nexecutor = \"worker\"\n",
        )
        .unwrap();
        let refused = Executors::from_file(&path, |_| None, false).unwrap_err();
        assert!(refused.to_string().contains("url"), "{refused}");
    }
}
