//! One tool call over MCP: approvals by elicitation (2025-11-25 and older) or by
//! `input_required` rounds (2026-07-28), cancellation and progress.

use super::{elicit, mrtr, render, McpConnection};
use crate::cancel::CancelToken;
use crate::gate::approval::{ApprovalRequest, Approver};
use crate::tools::Observation;
use mrtr::MrtrApprover;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ProgressNotificationParam,
};
use rmcp::service::{RequestContext, RoleServer};
use rmcp::ErrorData as McpError;
use serde_json::Value;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::oneshot;

/// How often progress is reported while a call runs.
const PROGRESS_INTERVAL: Duration = Duration::from_secs(1);
/// How long a cancelled call may take to notice (the guest is interrupted at the next epoch
/// tick) before it is dropped.
const CANCEL_GRACE: Duration = Duration::from_secs(2);

impl McpConnection {
    /// A 2025-11-25 (or older) call: approvals through `elicitation/create`.
    pub(super) async fn run_call(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> CallToolResult {
        let input = Value::Object(request.arguments.clone().unwrap_or_default());
        let peer = context.peer.clone();
        let elicits = peer
            .peer_info()
            .is_some_and(|info| info.capabilities.elicitation.is_some());
        // One approver per call: its approvals belong to this call, whatever id the client
        // gave the request.
        let elicit = elicits.then(|| {
            let ct = context.ct.clone();
            Arc::new(
                elicit::ElicitApprover::new(peer.clone()).with_cancelled(move || ct.is_cancelled()),
            )
        });
        let approver = elicit.clone().map(|a| a as Arc<dyn Approver>);
        let session = self.own_session();
        let (observation, _) = self
            .drive(
                &session,
                &request.name,
                input,
                approver,
                elicit,
                None,
                &context,
            )
            .await;
        render(&observation)
    }

    /// A 2026-07-28 call: approvals through `input_required` rounds, in the request's
    /// conversation.
    pub(super) async fn run_modern_call(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        let session = self.conversation(&context);
        let input = Value::Object(request.arguments.clone().unwrap_or_default());
        let key = &self.inner.state_key;
        let granted = match &request.request_state {
            None => None,
            Some(sealed) => {
                let state = key
                    .open(sealed, &request.name, &input, &session)
                    .map_err(|e| {
                        tracing::warn!(tool = %request.name, reason = ?e, "refused a requestState");
                        McpError::invalid_params(e.to_string(), None)
                    })?;
                let answer = request
                    .input_responses
                    .as_ref()
                    .and_then(mrtr::answer_from)
                    .ok_or_else(|| {
                        McpError::invalid_params(
                            format!("the retry carries requestState but no inputResponses.{}: answer the approval request and send its result under that key", mrtr::APPROVAL_INPUT),
                            None,
                        )
                    })?;
                if !key.mark_used(&state) {
                    return Err(McpError::invalid_params(
                        mrtr::StateRejected::Used.to_string(),
                        None,
                    ));
                }
                // Single use across every process serving this workspace, not only this one.
                let now = std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map_or(0, |d| d.as_secs());
                match self
                    .inner
                    .gate
                    .state()
                    .use_state_once(&state.nonce, state.expires, now)
                {
                    Ok(true) => {}
                    Ok(false) => {
                        return Err(McpError::invalid_params(
                            mrtr::StateRejected::Used.to_string(),
                            None,
                        ))
                    }
                    Err(e) => {
                        return Err(McpError::internal_error(
                            format!(
                            "could not record that this approval was used, so it is not run: {e}"
                        ),
                            None,
                        ))
                    }
                }
                Some((state, answer))
            }
        };
        let elicits = context
            .client_capabilities()
            .is_some_and(|c| c.elicitation.is_some());
        let (approver, asked) = if elicits || granted.is_some() {
            let (a, rx) = MrtrApprover::new(granted);
            (Some(a as Arc<dyn Approver>), Some(rx))
        } else {
            (None, None)
        };
        let (observation, question) = self
            .drive(
                &session,
                &request.name,
                input.clone(),
                approver,
                None,
                asked,
                &context,
            )
            .await;
        // The conversation's next request may reach another process serving this workspace
        // (stateless HTTP): what this call read is committed before it answers.
        self.inner.gate.state().reads_shared(&session);
        let Some(question) = question else {
            return Ok(render(&observation).into());
        };
        let state = mrtr::ApprovalState::new(&question, &request.name, &input, &session);
        let result = mrtr::input_required(&question, key.seal(&state)).map_err(|e| {
            McpError::internal_error(format!("building the approval request failed: {e}"), None)
        })?;
        Ok(CallToolResponse::InputRequired(result))
    }

    /// Run one call of the gate with cancellation and progress. With `asked`, a question
    /// handed out by the approver withdraws the call and is returned (the call did not run).
    #[allow(clippy::too_many_arguments)]
    async fn drive(
        &self,
        session: &str,
        name: &str,
        input: Value,
        approver: Option<Arc<dyn Approver>>,
        elicit: Option<Arc<elicit::ElicitApprover>>,
        asked: Option<oneshot::Receiver<ApprovalRequest>>,
        context: &RequestContext<RoleServer>,
    ) -> (Observation, Option<ApprovalRequest>) {
        let gate = &self.inner.gate;
        let peer = context.peer.clone();
        let cancel = CancelToken::new();
        let call = gate.call_cancellable(session, name, input, approver, cancel.clone());
        tokio::pin!(call);
        let mut listening = asked.is_some();
        let mut asked = asked;
        let mut question: Option<ApprovalRequest> = None;

        let progress_token = context.meta.get_progress_token();
        let started = Instant::now();
        // The first tick a second from now. (`interval` ticks at once, but awaiting that tick
        // still waits for the timer wheel's next millisecond: ~1 ms on every call, measured.)
        let mut tick = tokio::time::interval_at(
            tokio::time::Instant::now() + PROGRESS_INTERVAL,
            PROGRESS_INTERVAL,
        );
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut cancelled_at: Option<Instant> = None;
        let observation = loop {
            tokio::select! {
                // The cancellation first: an approval answered after it was sent approves
                // nothing, even when both are ready at once.
                biased;
                _ = context.ct.cancelled(), if cancelled_at.is_none() => {
                    cancel.cancel();
                    cancelled_at = Some(Instant::now());
                    // Withdraw its pending approval at once: the elicitation is cancelled at
                    // the client, and any answer from any surface finds nothing to approve.
                    if let Some(elicit) = &elicit {
                        for id in elicit.void() {
                            gate.broker().withdraw(&id);
                        }
                    }
                }
                q = async {
                    match asked.as_mut() {
                        Some(rx) => rx.await.ok(),
                        None => std::future::pending().await,
                    }
                }, if listening => {
                    listening = false;
                    asked = None;
                    // The question goes to the client: the call is withdrawn (nothing runs)
                    // and ends at the broker's next look at its cancel flag.
                    if let Some(q) = q {
                        cancel.cancel();
                        cancelled_at.get_or_insert_with(Instant::now);
                        gate.broker().withdraw(&q.id);
                        question = Some(q);
                    }
                }
                observation = &mut call => break Some(observation),
                _ = tick.tick() => {
                    if cancelled_at.is_some_and(|at| at.elapsed() >= CANCEL_GRACE) {
                        break None;
                    }
                    if let (Some(token), None) = (&progress_token, cancelled_at) {
                        let secs = started.elapsed().as_secs_f64().floor();
                        let note = ProgressNotificationParam::new(token.clone(), secs)
                            .with_message(format!("{name} running for {secs} s"));
                        if let Err(e) = peer.notify_progress(note).await {
                            tracing::debug!(error = %e, "sending progress failed");
                        }
                    }
                }
            }
        };
        let observation = observation.unwrap_or_else(|| {
            Observation::error(
                name,
                "",
                "cancelled",
                "the client cancelled the call".into(),
                None,
            )
        });
        (observation, question)
    }
}
