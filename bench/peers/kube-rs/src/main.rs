//! ebdman-rs: the ebdman operator written with kube-rs (kube 5, tokio), as a
//! peer for bench/ebd_bench.sh (`--operator-bin`). Same contract as
//! operator/ebdman and bench/peers/controller-runtime:
//!
//!   - for each EBD, server-side apply (field manager "ebdman", force) of a
//!     ConfigMap `<name>-config` (data = spec.vfmTemplate.config) and a VFM
//!     `<name>` (spec = spec.vfmTemplate), both labelled
//!     app.kubernetes.io/managed-by=ebdman and ebdman.example.com/ebd=<name>,
//!     carrying the EBD's vfm-sim.ebdman.example.com/* annotations and a
//!     controller ownerReference; a child is applied only when the cached one
//!     differs;
//!   - conditions Installed, VFMHealthy, Ready with observedGeneration and a
//!     lastTransitionTime that moves only when a status flips (the semantics
//!     of meta.SetStatusCondition), written by a status SSA of only the
//!     conditions it owns plus status.observedGeneration, and only when
//!     something changed;
//!   - events Installed / InstallFailed / BecameReady / BecameUnready on
//!     transitions (events.k8s.io, kube::runtime::events::Recorder).
//!
//! Typed objects (`#[derive(CustomResource)]`: EBD as
//! ebdman.example.com/v1beta1, the CRD's storage version; VFM as v1alpha1),
//! read from the controller's reflector stores; the stores strip
//! managedFields; ConfigMaps are watched with the managed-by label selector
//! only.
//!
//! ```text
//! ebdman-rs run [--workers N] [--metrics-bind-address ADDR]
//!               [--health-probe-bind-address ADDR] [--zap-log-level L] [--kubeconfig P]
//!               [--debounce-ms MS]   (kube-rs controller debounce, default 0)
//!               [--namespace NS]     (watch only NS: Api::namespaced; default all)
//! ```
use std::{
    collections::BTreeMap,
    io::IsTerminal,
    sync::{
        Arc,
        atomic::{AtomicBool, AtomicU64, Ordering},
    },
    time::Duration,
};

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::{
    NamespaceResourceScope,
    api::core::v1::ConfigMap,
    apimachinery::pkg::apis::meta::v1::{Condition, ObjectMeta, OwnerReference, Time},
    jiff::Timestamp,
};
use kube::{
    Api, Client, CustomResource, Resource, ResourceExt,
    api::{Patch, PatchParams},
    client::ClientBuilder,
    config::{KubeConfigOptions, Kubeconfig},
    runtime::{
        Controller, WatchStreamExt,
        controller::{self, Action},
        events::{Event, EventType, Recorder, Reporter},
        reflector::{self, ObjectRef, Store},
        watcher,
    },
};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tracing::{debug, error, info, warn};

const GROUP: &str = "ebdman.example.com";
const API_VERSION: &str = "ebdman.example.com/v1beta1"; // the EBD's
const FIELD_MANAGER: &str = "ebdman";
const ANN_PREFIX: &str = "vfm-sim.ebdman.example.com/";
const MANAGED_BY: &str = "app.kubernetes.io/managed-by";
const REPORTER: &str = "ebdman.example.com/ebdman";

/// VFMSpec: the desired state of a VFM, also an EBD's spec.vfmTemplate.
#[derive(CustomResource, Deserialize, Serialize, Clone, Debug, PartialEq, JsonSchema)]
#[kube(
    group = "ebdman.example.com",
    version = "v1alpha1",
    kind = "VFM",
    root = "Vfm",
    namespaced,
    status = "VfmStatus"
)]
pub struct VfmSpec {
    pub image: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replicas: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config: Option<BTreeMap<String, String>>,
}

#[derive(Deserialize, Serialize, Clone, Debug, Default, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct VfmStatus {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conditions: Option<Vec<Condition>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
}

/// EBDSpec: what a user asks for (v1beta1: v1alpha1's spec.vfm is
/// spec.vfmTemplate).
#[derive(CustomResource, Deserialize, Serialize, Clone, Debug, JsonSchema)]
#[kube(
    group = "ebdman.example.com",
    version = "v1beta1",
    kind = "EBD",
    root = "Ebd",
    namespaced,
    status = "EbdStatus",
    shortname = "ebd"
)]
#[serde(rename_all = "camelCase")]
pub struct EbdSpec {
    pub vfm_template: VfmSpec,
}

#[derive(Deserialize, Serialize, Clone, Debug, Default, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct EbdStatus {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conditions: Option<Vec<Condition>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
}

// ------------------------------------------------------------------ metrics

/// Requests the client sent, by method (counted above kube's retry layer: a
/// retried request counts once), and events published.
#[derive(Default)]
struct Metrics {
    requests: [AtomicU64; 6],
    events_sent: AtomicU64,
    events_failed: AtomicU64,
}

const METHODS: [&str; 6] = ["GET", "POST", "PUT", "PATCH", "DELETE", "OTHER"];

impl Metrics {
    fn count_request(&self, method: &http::Method) {
        let i = METHODS[..5]
            .iter()
            .position(|m| *m == method.as_str())
            .unwrap_or(5);
        self.requests[i].fetch_add(1, Ordering::Relaxed);
    }

    fn render(&self) -> String {
        let mut s = String::from(
            "# HELP rest_client_requests_total Number of HTTP requests, partitioned by method.\n\
             # TYPE rest_client_requests_total counter\n",
        );
        for (m, n) in METHODS.iter().zip(&self.requests) {
            s += &format!(
                "rest_client_requests_total{{method=\"{m}\"}} {}\n",
                n.load(Ordering::Relaxed)
            );
        }
        s += "# HELP ebdman_events_total Events published, by result.\n\
              # TYPE ebdman_events_total counter\n";
        s += &format!(
            "ebdman_events_total{{result=\"sent\"}} {}\nebdman_events_total{{result=\"failed\"}} {}\n",
            self.events_sent.load(Ordering::Relaxed),
            self.events_failed.load(Ordering::Relaxed)
        );
        s
    }
}

// ---------------------------------------------------------------- reconcile

#[derive(Debug)]
struct Error(kube::Error);

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

impl std::error::Error for Error {}

struct Ctx {
    client: Client,
    vfms: Store<Vfm>,
    cms: Store<ConfigMap>,
    recorder: Recorder,
    metrics: Arc<Metrics>,
}

/// The common metadata of a child: labels, propagated annotations and the
/// controller ownerReference.
fn child_meta(ebd: &Ebd, name: String) -> ObjectMeta {
    let ann: BTreeMap<String, String> = ebd
        .annotations()
        .iter()
        .filter(|(k, _)| k.starts_with(ANN_PREFIX))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    let owner = OwnerReference {
        block_owner_deletion: Some(true),
        ..ebd
            .controller_owner_ref(&())
            .expect("an EBD from the API server has a name and uid")
    };
    ObjectMeta {
        name: Some(name),
        namespace: ebd.namespace(),
        labels: Some(BTreeMap::from([
            (MANAGED_BY.to_string(), "ebdman".to_string()),
            (format!("{GROUP}/ebd"), ebd.name_any()),
        ])),
        annotations: (!ann.is_empty()).then_some(ann),
        owner_references: Some(vec![owner]),
        ..Default::default()
    }
}

/// The cached child's metadata matches what would be applied: controller
/// owner and propagated annotations.
fn meta_up_to_date(want: &ObjectMeta, have: &ObjectMeta) -> bool {
    let uid = &want
        .owner_references
        .as_ref()
        .expect("children have an owner")[0]
        .uid;
    let owned = have
        .owner_references
        .iter()
        .flatten()
        .any(|o| o.controller == Some(true) && &o.uid == uid);
    let empty = BTreeMap::new();
    let wa = want.annotations.as_ref().unwrap_or(&empty);
    let ha = have.annotations.as_ref().unwrap_or(&empty);
    owned
        && wa.iter().all(|(k, v)| ha.get(k) == Some(v))
        && ha
            .keys()
            .all(|k| !k.starts_with(ANN_PREFIX) || wa.contains_key(k))
}

/// Equal maps, absent and empty being the same.
fn same_map(a: &Option<BTreeMap<String, String>>, b: &Option<BTreeMap<String, String>>) -> bool {
    a.as_ref().filter(|m| !m.is_empty()) == b.as_ref().filter(|m| !m.is_empty())
}

fn permanent(e: &kube::Error) -> Option<&str> {
    match e {
        kube::Error::Api(s) if matches!(s.code, 400 | 401 | 403 | 404 | 422) => Some(&s.message),
        _ => None,
    }
}

/// Applies one child: Ok(Ok(())) when applied, Ok(Err(message)) when the API
/// server refused it for good, Err(e) on a transient error.
async fn apply<K>(api: Api<K>, obj: &K) -> Result<Result<(), String>, Error>
where
    K: Resource<DynamicType = ()>
        + Serialize
        + Clone
        + std::fmt::Debug
        + serde::de::DeserializeOwned,
{
    let pp = PatchParams::apply(FIELD_MANAGER).force();
    let name = obj.name_any();
    match api.patch(&name, &pp, &Patch::Apply(obj)).await {
        Ok(_) => Ok(Ok(())),
        Err(e) => match permanent(&e) {
            Some(msg) => Ok(Err(format!("{} {name}: {msg}", K::kind(&())))),
            None => Err(Error(e)),
        },
    }
}

fn cond(type_: &str, status: &str, reason: &str, message: &str, generation: i64) -> Condition {
    Condition {
        type_: type_.into(),
        status: status.into(),
        reason: reason.into(),
        message: message.into(),
        observed_generation: Some(generation),
        last_transition_time: Time(Timestamp::now()),
    }
}

fn find<'a>(conds: &'a [Condition], type_: &str) -> Option<&'a Condition> {
    conds.iter().find(|c| c.type_ == type_)
}

/// meta.SetStatusCondition: lastTransitionTime moves only when the status
/// flips; true when anything changed.
fn set_status_condition(conds: &mut Vec<Condition>, new: Condition) -> bool {
    let Some(c) = conds.iter_mut().find(|c| c.type_ == new.type_) else {
        conds.push(new);
        return true;
    };
    let mut changed = false;
    if c.status != new.status {
        c.status = new.status;
        c.last_transition_time = new.last_transition_time;
        changed = true;
    }
    if c.reason != new.reason {
        c.reason = new.reason;
        changed = true;
    }
    if c.message != new.message {
        c.message = new.message;
        changed = true;
    }
    if c.observed_generation != new.observed_generation {
        c.observed_generation = new.observed_generation;
        changed = true;
    }
    changed
}

/// VFMHealthy, as operator/ebdman/conditions.c computes it.
fn vfm_health(vfm: Option<&Vfm>, applied_new_spec: bool, generation: i64) -> Condition {
    let progressing = || {
        cond(
            "VFMHealthy",
            "False",
            "Progressing",
            "vfm custom resource is not ready",
            generation,
        )
    };
    let Some(vfm) = vfm.filter(|_| !applied_new_spec) else {
        return progressing();
    };
    let conds = vfm
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_deref())
        .unwrap_or_default();
    let Some(ready) = find(conds, "Ready") else {
        return progressing();
    };
    let og = ready.observed_generation.unwrap_or(0);
    if og != 0 && og < vfm.metadata.generation.unwrap_or(0) {
        progressing()
    } else if ready.status == "True" {
        cond(
            "VFMHealthy",
            "True",
            "Ready",
            "vfm custom resource is ready",
            generation,
        )
    } else if ready.status == "False" && ready.reason == "Failed" {
        let msg = if ready.message.is_empty() {
            "vfm custom resource failed"
        } else {
            &ready.message
        };
        cond("VFMHealthy", "False", "Error", msg, generation)
    } else {
        progressing()
    }
}

async fn reconcile(ebd: Arc<Ebd>, ctx: Arc<Ctx>) -> Result<Action, Error> {
    if ebd.metadata.deletion_timestamp.is_some() {
        return Ok(Action::await_change());
    }
    let ns = ebd.namespace().unwrap_or_default();
    let name = ebd.name_any();
    let generation = ebd.metadata.generation.unwrap_or(0);

    let cm = ConfigMap {
        metadata: child_meta(&ebd, format!("{name}-config")),
        data: Some(ebd.spec.vfm_template.config.clone().unwrap_or_default()),
        ..Default::default()
    };
    let mut vfm = Vfm::new(&name, ebd.spec.vfm_template.clone());
    vfm.metadata = child_meta(&ebd, name.clone());

    let cm_ok = ctx
        .cms
        .get(&ObjectRef::new(&format!("{name}-config")).within(&ns))
        .is_some_and(|have| {
            same_map(&have.data, &cm.data) && meta_up_to_date(&cm.metadata, &have.metadata)
        });
    let mut failed = if cm_ok {
        Ok(())
    } else {
        apply(Api::namespaced(ctx.client.clone(), &ns), &cm).await?
    };
    let mut applied_spec = false;
    if failed.is_ok() {
        let vfm_ref = ObjectRef::new(&name).within(&ns);
        let vfm_ok = ctx.vfms.get(&vfm_ref).is_some_and(|have| {
            have.spec == vfm.spec && meta_up_to_date(&vfm.metadata, &have.metadata)
        });
        if !vfm_ok {
            failed = apply(Api::namespaced(ctx.client.clone(), &ns), &vfm).await?;
            applied_spec = failed.is_ok();
        }
    }

    let seen = ctx.vfms.get(&ObjectRef::new(&name).within(&ns));
    let installed = match &failed {
        Ok(()) => cond(
            "Installed",
            "True",
            "Installed",
            "configmap and vfm custom resource applied",
            generation,
        ),
        Err(msg) => cond("Installed", "False", "InstallFailed", msg, generation),
    };
    let health = vfm_health(seen.as_deref(), applied_spec, generation);
    let ready = if installed.status != "True" {
        cond(
            "Ready",
            "False",
            &installed.reason,
            &installed.message,
            generation,
        )
    } else if health.status != "True" {
        cond(
            "Ready",
            "False",
            &health.reason,
            &health.message,
            generation,
        )
    } else {
        cond("Ready", "True", "Ready", "ebd is ready", generation)
    };

    let status = ebd.status.as_ref();
    let old = status
        .and_then(|s| s.conditions.clone())
        .unwrap_or_default();
    let mut conds = old.clone();
    let mut changed = false;
    for c in [installed.clone(), health, ready.clone()] {
        changed |= set_status_condition(&mut conds, c);
    }
    if !changed && status.and_then(|s| s.observed_generation) == Some(generation) {
        return Ok(Action::await_change());
    }
    // Status SSA with only the conditions this manager owns.
    let owned: Vec<&Condition> = ["Installed", "VFMHealthy", "Ready"]
        .iter()
        .filter_map(|t| find(&conds, t))
        .collect();
    let patch = serde_json::json!({
        "apiVersion": API_VERSION,
        "kind": "EBD",
        "metadata": { "name": name, "namespace": ns },
        "status": { "observedGeneration": generation, "conditions": owned },
    });
    let ebds: Api<Ebd> = Api::namespaced(ctx.client.clone(), &ns);
    ebds.patch_status(
        &name,
        &PatchParams::apply(FIELD_MANAGER).force(),
        &Patch::Apply(&patch),
    )
    .await
    .map_err(Error)?;
    transitions(&ctx, &ebd, &old, &installed, &ready).await;
    Ok(Action::await_change())
}

/// The events of the condition transitions this reconcile wrote.
async fn transitions(ctx: &Ctx, ebd: &Ebd, old: &[Condition], inst: &Condition, ready: &Condition) {
    let (oi, or) = (find(old, "Installed"), find(old, "Ready"));
    let mut events = Vec::new();
    if inst.status == "True" && oi.is_none_or(|c| c.status != "True") {
        events.push((
            EventType::Normal,
            "Installed",
            "Install",
            inst.message.clone(),
        ));
    }
    if inst.status == "False" && oi.is_none_or(|c| c.status != "False" || c.message != inst.message)
    {
        events.push((
            EventType::Warning,
            "InstallFailed",
            "Install",
            inst.message.clone(),
        ));
    }
    if ready.status == "True" && or.is_none_or(|c| c.status != "True") {
        events.push((
            EventType::Normal,
            "BecameReady",
            "Reconcile",
            "ebd is ready".to_string(),
        ));
    }
    if or.is_some_and(|c| c.status == "True") && ready.status != "True" {
        events.push((
            EventType::Warning,
            "BecameUnready",
            "Reconcile",
            format!("{}: {}", ready.reason, ready.message),
        ));
    }
    let reference = ebd.object_ref(&());
    for (type_, reason, action, note) in events {
        let ev = Event {
            type_,
            reason: reason.into(),
            note: Some(note),
            action: action.into(),
            secondary: None,
        };
        match ctx.recorder.publish(&ev, &reference).await {
            Ok(()) => ctx.metrics.events_sent.fetch_add(1, Ordering::Relaxed),
            Err(e) => {
                warn!(ebd = %ebd.name_any(), reason, error = %e, "publishing an event failed");
                ctx.metrics.events_failed.fetch_add(1, Ordering::Relaxed)
            }
        };
    }
}

fn error_policy(ebd: Arc<Ebd>, err: &Error, _ctx: Arc<Ctx>) -> Action {
    warn!(ebd = %ebd.name_any(), error = %err, "reconcile failed, retrying in 1 s");
    Action::requeue(Duration::from_secs(1))
}

// ------------------------------------------------------------ http probes

/// Which of the three reflectors (EBDs, VFMs, ConfigMaps) have seen the end
/// of their initial list (watcher::Event::InitDone), i.e. whose store is
/// ready. Not Store::wait_until_ready: its DelayedInit wakes one waiter only
/// (a futures oneshot Receiver keeps one waker), and the Controller itself
/// awaits the EBD store's, so a second task awaiting it can sleep forever,
/// or take the wake-up from the Controller.
#[derive(Default)]
struct Synced([AtomicBool; 3]);

impl Synced {
    fn all(&self) -> bool {
        self.0.iter().all(|f| f.load(Ordering::Acquire))
    }
}

fn mark_synced<K>(synced: &Arc<Synced>, i: usize) -> impl FnMut(&watcher::Event<K>) + use<K> {
    let synced = synced.clone();
    move |ev| {
        if matches!(ev, watcher::Event::InitDone)
            && !synced.0[i].swap(true, Ordering::AcqRel)
            && synced.all()
        {
            info!("caches synced");
        }
    }
}

/// A minimal HTTP/1.1 server: /readyz, /healthz and /metrics, one request per
/// connection.
async fn serve(addr: String, ready: Arc<Synced>, metrics: Arc<Metrics>) {
    let listener = match tokio::net::TcpListener::bind(&addr).await {
        Ok(l) => l,
        Err(e) => {
            error!(%addr, error = %e, "cannot listen");
            std::process::exit(1);
        }
    };
    loop {
        let Ok((mut sock, _)) = listener.accept().await else {
            continue;
        };
        let (ready, metrics) = (ready.clone(), metrics.clone());
        tokio::spawn(async move {
            let mut buf = Vec::with_capacity(1024);
            let mut chunk = [0u8; 1024];
            let read = async {
                while !buf.windows(4).any(|w| w == b"\r\n\r\n") && buf.len() < 8192 {
                    match sock.read(&mut chunk).await {
                        Ok(0) | Err(_) => return false,
                        Ok(n) => buf.extend_from_slice(&chunk[..n]),
                    }
                }
                true
            };
            if !matches!(
                tokio::time::timeout(Duration::from_secs(5), read).await,
                Ok(true)
            ) {
                return;
            }
            let line = String::from_utf8_lossy(&buf);
            let path = line.split_whitespace().nth(1).unwrap_or("/");
            let path = path.split('?').next().unwrap_or(path);
            let (code, ctype, body) = match path {
                "/healthz" => ("200 OK", "text/plain", "ok".to_string()),
                "/readyz" if ready.all() => ("200 OK", "text/plain", "ok".to_string()),
                "/readyz" => (
                    "503 Service Unavailable",
                    "text/plain",
                    "caches not synced".to_string(),
                ),
                "/metrics" => ("200 OK", "text/plain; version=0.0.4", metrics.render()),
                _ => ("404 Not Found", "text/plain", "not found".to_string()),
            };
            let resp = format!(
                "HTTP/1.1 {code}\r\nContent-Type: {ctype}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
            let _ = sock.write_all(resp.as_bytes()).await;
            let _ = sock.shutdown().await;
        });
    }
}

/// controller-runtime's address forms: ":8080" is every interface, "0"
/// disables the server.
fn bind_address(a: &str) -> Option<String> {
    match a {
        "" | "0" => None,
        a if a.starts_with(':') => Some(format!("0.0.0.0{a}")),
        a => Some(a.to_string()),
    }
}

// --------------------------------------------------------------------- main

struct Opts {
    workers: u16,
    metrics_addr: String,
    probe_addr: String,
    log_level: tracing::Level,
    kubeconfig: Option<String>,
    debounce: Duration,
    namespace: Option<String>,
}

fn usage() -> ! {
    eprintln!(
        "usage: ebdman-rs run [--workers N] [--metrics-bind-address ADDR] \
         [--health-probe-bind-address ADDR] [--zap-log-level L] [--kubeconfig P] [--debounce-ms MS] [--namespace NS]"
    );
    std::process::exit(2);
}

fn parse_args() -> Opts {
    let mut o = Opts {
        workers: 4,
        metrics_addr: ":8080".into(),
        probe_addr: ":8081".into(),
        log_level: tracing::Level::INFO,
        kubeconfig: None,
        debounce: Duration::ZERO,
        namespace: None,
    };
    let mut args = std::env::args().skip(1).peekable();
    if args.peek().map(String::as_str) == Some("run") {
        args.next();
    }
    while let Some(arg) = args.next() {
        let (flag, inline) = match arg.split_once('=') {
            Some((f, v)) => (f.to_string(), Some(v.to_string())),
            None => (arg, None),
        };
        if flag == "-h" || flag == "--help" {
            usage();
        }
        let Some(value) = inline.or_else(|| args.next()) else {
            usage()
        };
        match flag.as_str() {
            "--workers" => {
                o.workers = value
                    .parse()
                    .ok()
                    .filter(|w| *w > 0)
                    .unwrap_or_else(|| usage())
            }
            "--metrics-bind-address" => o.metrics_addr = value,
            "--health-probe-bind-address" => o.probe_addr = value,
            "--kubeconfig" => o.kubeconfig = Some(value),
            "--namespace" => o.namespace = Some(value),
            "--debounce-ms" => {
                o.debounce = Duration::from_millis(value.parse().unwrap_or_else(|_| usage()))
            }
            "--zap-log-level" => {
                o.log_level = match value.as_str() {
                    "debug" => tracing::Level::DEBUG,
                    "info" => tracing::Level::INFO,
                    "warn" => tracing::Level::WARN,
                    "error" => tracing::Level::ERROR,
                    _ => usage(),
                }
            }
            _ => usage(),
        }
    }
    o
}

async fn client(
    kubeconfig: Option<&str>,
    metrics: Arc<Metrics>,
) -> Result<Client, Box<dyn std::error::Error>> {
    let config = match kubeconfig {
        Some(p) => {
            kube::Config::from_custom_kubeconfig(
                Kubeconfig::read_from(p)?,
                &KubeConfigOptions::default(),
            )
            .await?
        }
        None => kube::Config::infer().await?, // $KUBECONFIG, ~/.kube/config, in-cluster
    };
    let count = tower::util::MapRequestLayer::new(move |req: http::Request<kube::client::Body>| {
        metrics.count_request(req.method());
        req
    });
    Ok(ClientBuilder::try_from(config)?.with_layer(&count).build())
}

/// What a watcher lists and watches: one namespace's objects with
/// `--namespace` (the apiserver filters), every namespace's otherwise.
fn api<K>(client: &Client, ns: Option<&str>) -> Api<K>
where
    K: Resource<Scope = NamespaceResourceScope>,
    <K as Resource>::DynamicType: Default,
{
    match ns {
        Some(ns) => Api::namespaced(client.clone(), ns),
        None => Api::all(client.clone()),
    }
}

/// The reflectors keep no managedFields.
fn strip<K: Resource>(o: &mut K) {
    o.meta_mut().managed_fields = None;
}

#[tokio::main]
async fn main() {
    let o = parse_args();
    tracing_subscriber::fmt()
        .with_max_level(o.log_level)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .init();
    let metrics = Arc::new(Metrics::default());
    let client = match client(o.kubeconfig.as_deref(), metrics.clone()).await {
        Ok(c) => c,
        Err(e) => {
            error!(error = %e, "loading the kubeconfig");
            std::process::exit(1);
        }
    };

    let ready = Arc::new(Synced::default());
    let wc = watcher::Config::default();
    let (ebd_store, ebd_writer) = reflector::store::<Ebd>();
    let (vfm_store, vfm_writer) = reflector::store::<Vfm>();
    let (cm_store, cm_writer) = reflector::store::<ConfigMap>();
    let ns = o.namespace.as_deref();
    let ebds = watcher(api::<Ebd>(&client, ns), wc.clone())
        .default_backoff()
        .modify(strip)
        .reflect(ebd_writer)
        .inspect_ok(mark_synced(&ready, 0))
        .applied_objects();
    let vfms = watcher(api::<Vfm>(&client, ns), wc.clone())
        .default_backoff()
        .modify(strip)
        .reflect(vfm_writer)
        .inspect_ok(mark_synced(&ready, 1))
        .touched_objects();
    let cms = watcher(
        api::<ConfigMap>(&client, ns),
        wc.labels(&format!("{MANAGED_BY}=ebdman")),
    )
    .default_backoff()
    .modify(strip)
    .reflect(cm_writer)
    .inspect_ok(mark_synced(&ready, 2))
    .touched_objects();

    if let Some(addr) = bind_address(&o.probe_addr) {
        tokio::spawn(serve(addr, ready.clone(), metrics.clone()));
    }
    if let Some(addr) = bind_address(&o.metrics_addr) {
        tokio::spawn(serve(addr, ready.clone(), metrics.clone()));
    }

    let ctx = Arc::new(Ctx {
        client: client.clone(),
        vfms: vfm_store,
        cms: cm_store,
        recorder: Recorder::new(client, Reporter::from(REPORTER)),
        metrics,
    });
    info!(
        workers = o.workers,
        namespace = ns.unwrap_or("(all)"),
        "ebdman-rs starting"
    );
    Controller::for_stream(ebds, ebd_store)
        .owns_stream(vfms)
        .owns_stream(cms)
        .with_config(
            controller::Config::default()
                .concurrency(o.workers)
                .debounce(o.debounce),
        )
        .shutdown_on_signal()
        .run(reconcile, error_policy, ctx)
        .for_each(|res| async move {
            match res {
                Ok((obj, _)) => debug!(ebd = %obj, "reconciled"),
                Err(controller::Error::ObjectNotFound(obj)) => {
                    debug!(ebd = %obj, "gone before its reconcile")
                }
                Err(e) => warn!(error = %e, "controller"),
            }
        })
        .await;
    info!("ebdman-rs stopped");
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(secs: i64) -> Time {
        Time(Timestamp::from_second(secs).unwrap())
    }

    fn with_time(mut c: Condition, t: Time) -> Condition {
        c.last_transition_time = t;
        c
    }

    #[test]
    fn transition_time_moves_only_when_the_status_flips() {
        let mut conds = vec![with_time(
            cond("Ready", "False", "Progressing", "m", 1),
            at(100),
        )];
        // Same status, other reason/message/generation: changed, time kept.
        assert!(set_status_condition(
            &mut conds,
            with_time(cond("Ready", "False", "Error", "boom", 2), at(200))
        ));
        assert_eq!(conds[0].last_transition_time, at(100));
        assert_eq!(
            (conds[0].reason.as_str(), conds[0].message.as_str()),
            ("Error", "boom")
        );
        assert_eq!(conds[0].observed_generation, Some(2));
        // Nothing new: unchanged.
        assert!(!set_status_condition(
            &mut conds,
            with_time(cond("Ready", "False", "Error", "boom", 2), at(300))
        ));
        assert_eq!(conds[0].last_transition_time, at(100));
        // Status flips: the new time.
        assert!(set_status_condition(
            &mut conds,
            with_time(cond("Ready", "True", "Ready", "ok", 2), at(400))
        ));
        assert_eq!(conds[0].last_transition_time, at(400));
        // A new type is appended.
        assert!(set_status_condition(
            &mut conds,
            cond("Installed", "True", "Installed", "", 2)
        ));
        assert_eq!(conds.len(), 2);
    }

    fn vfm(generation: i64, ready: Option<(&str, &str, &str, i64)>) -> Vfm {
        let mut v = Vfm::new(
            "a",
            VfmSpec {
                image: "i".into(),
                replicas: None,
                config: None,
            },
        );
        v.metadata.generation = Some(generation);
        v.status = ready.map(|(status, reason, message, og)| VfmStatus {
            conditions: Some(vec![cond("Ready", status, reason, message, og)]),
            observed_generation: None,
        });
        v
    }

    #[test]
    fn vfm_health_follows_conditions_c() {
        let h = |v: Option<&Vfm>, applied| {
            let c = vfm_health(v, applied, 7);
            assert_eq!(c.observed_generation, Some(7));
            (c.status, c.reason, c.message)
        };
        let s = |a: &str, b: &str, c: &str| (a.to_string(), b.to_string(), c.to_string());
        let progressing = s("False", "Progressing", "vfm custom resource is not ready");
        assert_eq!(h(None, false), progressing);
        let ready = vfm(2, Some(("True", "Ready", "", 2)));
        assert_eq!(
            h(Some(&ready), false),
            s("True", "Ready", "vfm custom resource is ready")
        );
        assert_eq!(
            h(Some(&ready), true),
            progressing,
            "a spec just applied is not ready yet"
        );
        assert_eq!(
            h(Some(&vfm(3, Some(("True", "Ready", "", 2)))), false),
            progressing,
            "stale"
        );
        assert_eq!(
            h(Some(&vfm(3, Some(("True", "Ready", "", 0)))), false).0,
            "True"
        );
        assert_eq!(h(Some(&vfm(1, None)), false), progressing);
        assert_eq!(
            h(Some(&vfm(1, Some(("False", "Failed", "boom", 1)))), false),
            s("False", "Error", "boom")
        );
        assert_eq!(
            h(Some(&vfm(1, Some(("False", "Failed", "", 1)))), false),
            s("False", "Error", "vfm custom resource failed")
        );
        assert_eq!(
            h(Some(&vfm(1, Some(("False", "Other", "x", 1)))), false),
            progressing
        );
    }

    #[test]
    fn children_compare_annotations_owner_and_empty_maps() {
        let want = ObjectMeta {
            annotations: Some(BTreeMap::from([(
                format!("{ANN_PREFIX}delay"),
                "1s".into(),
            )])),
            owner_references: Some(vec![OwnerReference {
                uid: "u1".into(),
                controller: Some(true),
                ..Default::default()
            }]),
            ..Default::default()
        };
        let mut have = want.clone();
        assert!(meta_up_to_date(&want, &have));
        have.annotations
            .as_mut()
            .unwrap()
            .insert("other/x".into(), "y".into());
        assert!(
            meta_up_to_date(&want, &have),
            "annotations of others are not ours"
        );
        have.annotations
            .as_mut()
            .unwrap()
            .insert(format!("{ANN_PREFIX}fail"), "x".into());
        assert!(
            !meta_up_to_date(&want, &have),
            "a propagated annotation the EBD dropped"
        );
        let mut have = want.clone();
        have.owner_references.as_mut().unwrap()[0].uid = "u2".into();
        assert!(!meta_up_to_date(&want, &have), "another owner");
        assert!(same_map(&None, &Some(BTreeMap::new())));
        assert!(!same_map(
            &None,
            &Some(BTreeMap::from([("k".into(), "v".into())]))
        ));
    }

    #[test]
    fn ebd_is_v1beta1_with_spec_vfm_template() {
        assert_eq!(Ebd::api_version(&()), API_VERSION);
        assert_eq!(Vfm::api_version(&()), "ebdman.example.com/v1alpha1");
        let ebd: Ebd = serde_json::from_value(serde_json::json!({
            "apiVersion": "ebdman.example.com/v1beta1",
            "kind": "EBD",
            "metadata": {"name": "a", "namespace": "n", "uid": "u"},
            "spec": {"vfmTemplate": {"image": "i", "replicas": 2, "config": {"k": "v"}}},
        }))
        .unwrap();
        assert_eq!(ebd.spec.vfm_template.image, "i");
        assert_eq!(ebd.spec.vfm_template.replicas, Some(2));
        let back = serde_json::to_value(&ebd.spec).unwrap();
        assert_eq!(back["vfmTemplate"]["config"]["k"], "v");
        assert!(back.get("vfm_template").is_none());
        let owner = child_meta(&ebd, "a".into()).owner_references.unwrap();
        assert_eq!(owner[0].api_version, "ebdman.example.com/v1beta1");
    }
}
