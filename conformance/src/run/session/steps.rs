//! The steps that act: frames sent, agent operations (post_send,
//! modify_qp, ...), and the refusals an IUT must give.

use super::*;

impl Test<'_> {
    pub(super) fn run_step(&mut self, step: &Step) -> Result<(), Stop> {
        match step {
            Step::Send(s) => {
                let ctx = self.ctx();
                let frame = build(s, ctx).map_err(|e| Stop::Error(format!("send: {e}")))?;
                let copies = s.repeat.unwrap_or(1).clamp(1, 10_000);
                for _ in 0..copies {
                    // The frame cannot reach the IUT before this time.
                    self.set_anchor(self.iut.now_ns());
                    // A held frame (a burst's) leaves without the IUT
                    // answering before the next step.
                    if s.hold {
                        self.iut.send_held(&frame)?;
                    } else {
                        self.iut.send(&frame)?;
                    }
                    let now = self.iut.now_ns();
                    // `sent_ns`: when the harness last sent, in ns since the
                    // test began (timing vectors measure from it).
                    let since = now.saturating_sub(self.start_ns);
                    if let Some(ctx) = self.ctx.as_mut() {
                        ctx.bindings.set("sent_ns", since);
                    }
                    self.log(
                        Direction::Sent,
                        now,
                        &frame,
                        s.note.clone().unwrap_or_default(),
                    );
                }
                let sum = self
                    .packets
                    .last()
                    .map(|p| p.summary.clone())
                    .unwrap_or_default();
                self.record(
                    "send",
                    true,
                    if copies > 1 {
                        format!("{sum} ×{copies}")
                    } else {
                        sum
                    },
                );
                Ok(())
            }
            Step::Expect(e) => self.expect(e),
            Step::ExpectNone(e) => self.expect_none(e),
            Step::Wait(w) => {
                let within_us = self.window_us(&w.within_us)?;
                let deadline = self.deadline(within_us);
                while let Some(o) = self.iut.recv(deadline)? {
                    self.pending.push_back(o);
                }
                self.record("wait", true, format!("{within_us} µs"));
                Ok(())
            }
            Step::PostSend(p) => self.post_send(p),
            Step::PostRecv(r) => {
                self.post_recv(r).map_err(Stop::Inconc)?;
                self.record("post_recv", true, format!("wr_id {}", r.wr_id));
                Ok(())
            }
            Step::ExpectCompletion(c) => self.expect_completion(c),
            Step::ExpectNoCompletion(w) => {
                let within_us = self.window_us(&w.within_us)?;
                let ctx = self.ctx();
                let req = json!({"op": "poll_cq", "cq": ctx.cq, "max": 16,
                    "wait_ms": wait_ms(within_us * 1_000 + self.bed.margin_ns)});
                let reply = self.iut.agent(req)?;
                let map = agent_ok(reply, "poll_cq").map_err(Stop::Error)?;
                let got = map
                    .get("completions")
                    .and_then(Value::as_array)
                    .cloned()
                    .unwrap_or_default();
                if let Some(why) = gave_up(&got) {
                    // D3: the IUT's retry budget ran out within the
                    // window (its margin included): the step's frame
                    // completed nothing, its own timers did (MR-MPL-8,
                    // MR-TMR: RETRY_EXC_ERR after retry_cnt retries).
                    let detail = format!(
                        "no completion caused by the step; {why} within {}",
                        self.window_text(within_us)
                    );
                    self.gave_up = Some(format!("step {}: {detail}", self.step.unwrap_or(0)));
                    self.record("expect_no_completion", true, detail);
                    return Ok(());
                }
                let (forbidden, allowed): (Vec<&Value>, Vec<&Value>) = got
                    .iter()
                    .partition(|wc| check_fields(wc, &w.fields, self.ctx()).is_ok());
                if let Some(first) = forbidden.first() {
                    let reason = if w.fields.is_empty() {
                        format!("a completion appeared where none may: {first}")
                    } else {
                        format!("a completion the step forbids appeared: {first}")
                    };
                    self.record("expect_no_completion", false, reason.clone());
                    return Err(self.fail(&None, reason));
                }
                let detail = match allowed.first() {
                    Some(first) => format!(
                        "none forbidden in {within_us} µs; {} allowed, the first {first}",
                        allowed.len()
                    ),
                    None => format!("none in {within_us} µs"),
                };
                self.record("expect_no_completion", true, detail);
                Ok(())
            }
            Step::ExpectMemory(m) => self.expect_memory(m),
            Step::WriteMemory(m) => {
                let ctx = self.ctx();
                let mr = *ctx
                    .mrs
                    .get(&m.mr)
                    .ok_or_else(|| Stop::Error(format!("no MR `{}`", m.mr)))?;
                let data =
                    bytes(&m.bytes, ctx).map_err(|e| Stop::Error(format!("write_memory: {e}")))?;
                let reply = self.iut.agent(json!({"op": "write_mr", "mr": mr.handle,
                    "offset": m.offset, "hex": hex::encode(&data)}))?;
                agent_ok(reply, "write_mr").map_err(Stop::Inconc)?;
                self.record(
                    "write_memory",
                    true,
                    format!("{} bytes at {}+{}", data.len(), m.mr, m.offset),
                );
                Ok(())
            }
            Step::ExpectCounters(want) => {
                // MR-ROB-10 counts once the traffic has quiesced: on a live
                // IUT the last frame may still be in its receive path.
                if !self.iut.virtual_time() {
                    let until = self.iut.now_ns().saturating_add(self.bed.margin_ns);
                    while let Some(o) = self.iut.recv(until)? {
                        self.pending.push_back(o);
                    }
                }
                // Counters are a SHOULD (MR-ROB-9): an IUT that declares none
                // still runs the rest of the vector.
                if self.bed.profile.get("counters") == Some(&Value::Bool(false)) {
                    self.record(
                        "expect_counters",
                        true,
                        "skipped: the capability profile declares counters absent".into(),
                    );
                    return Ok(());
                }
                let now = self.read_counters().ok_or_else(|| {
                    Stop::Inconc("expect_counters: the agent reports no counters".into())
                })?;
                let start = self.ctx().counters_at_start.clone();
                let mut view = Map::new();
                for (k, v) in &now {
                    view.insert(
                        k.clone(),
                        json!(v.saturating_sub(start.get(k).copied().unwrap_or(0))),
                    );
                }
                let view = Value::Object(view);
                match check_fields(&view, want, self.ctx()) {
                    Ok(()) => {
                        self.record("expect_counters", true, "counters as expected".into());
                        Ok(())
                    }
                    Err(misses) => {
                        let reason = format!("counters: {}", misses.join("; "));
                        self.record("expect_counters", false, reason.clone());
                        Err(self.fail(&None, reason))
                    }
                }
            }
            Step::DeregMr(d) => {
                let mr = *self
                    .ctx()
                    .mrs
                    .get(&d.mr)
                    .ok_or_else(|| Stop::Error(format!("no MR `{}`", d.mr)))?;
                let reply = self.iut.agent(json!({"op": "dereg_mr", "mr": mr.handle}))?;
                agent_ok(reply, "dereg_mr").map_err(Stop::Inconc)?;
                self.deregistered.insert(d.mr.clone());
                self.record("dereg_mr", true, format!("`{}`", d.mr));
                Ok(())
            }
            Step::ModifyQp(m) => self.modify_qp(m),
            Step::ExpectQpState(want) => {
                let qpn = self.ctx().iut_qpn;
                let reply = self.iut.agent(json!({"op": "query_qp", "qpn": qpn}))?;
                let map = agent_ok(reply, "query_qp").map_err(Stop::Inconc)?;
                let got = map.get("state").and_then(Value::as_str).unwrap_or("none");
                let allowed = std::iter::once(&want.state).chain(&want.alternatives);
                if allowed.clone().any(|s| got.eq_ignore_ascii_case(s)) {
                    self.record("expect_qp_state", true, got.to_string());
                    Ok(())
                } else {
                    let names: Vec<&str> = allowed.map(String::as_str).collect();
                    let reason = format!("QP state {got}, expected {}", names.join(" or "));
                    self.record("expect_qp_state", false, reason.clone());
                    Err(self.fail(&want.requirement, reason))
                }
            }
        }
    }

    pub(super) fn post_send(&mut self, p: &PostSendStep) -> Result<(), Stop> {
        let ctx = self.ctx();
        let sg = self.sg_json(&p.sg).map_err(Stop::Error)?;
        let mut req = json!({"op": "post_send", "qpn": self.qpn_for(p.second_qp), "wr_id": p.wr_id,
            "opcode": p.opcode, "sg_list": sg});
        let n = |x: &Option<crate::vector::model::Num>| -> Result<Option<u64>, Stop> {
            x.as_ref()
                .map(|v| num(v, ctx))
                .transpose()
                .map_err(|e| Stop::Error(format!("post_send: {e}")))
        };
        for (key, val) in [
            ("remote_addr", n(&p.remote_addr)?),
            ("rkey", n(&p.rkey)?),
            ("imm", n(&p.imm)?),
            ("invalidate_rkey", n(&p.invalidate_rkey)?),
            ("compare", n(&p.compare)?),
            ("swap", n(&p.swap)?),
            ("add", n(&p.add)?),
        ] {
            if let Some(v) = val {
                req[key] = v.into();
            }
        }
        if let Some(s) = p.signaled {
            req["signaled"] = s.into();
        }
        if p.fence {
            req["fence"] = true.into();
        }
        if p.solicited {
            req["solicited"] = true.into();
        }
        if let Some(ud) = &p.ud {
            let h = self.iut.harness();
            let qpn = match &ud.qpn {
                Some(q) => num(q, ctx).map_err(|e| Stop::Error(format!("post_send.ud: {e}")))?,
                None => ctx.bindings.get("h.qpn").unwrap_or(0),
            };
            let qkey = num(&ud.qkey, ctx).map_err(|e| Stop::Error(format!("post_send.ud: {e}")))?;
            req["ud"] = json!({"ip": h.ip.to_string(), "mac": mac_text(h.mac),
                "qpn": qpn, "qkey": qkey});
        }
        let reply = self.iut.agent(req)?;
        let what = format!("post_send {} wr_id {}", p.opcode, p.wr_id);
        self.refusal_step(
            "post_send",
            &what,
            reply,
            p.refused.as_ref().and_then(Refusal::expected),
            &p.requirement,
        )
    }

    pub(super) fn modify_qp(&mut self, m: &ModifyQpStep) -> Result<(), Stop> {
        let ctx = self.ctx();
        let qpn = ctx.iut_qpn;
        let mut attrs = if m.rtr_defaults {
            ctx.rtr_attrs.clone()
        } else {
            Map::new()
        };
        for (k, v) in &m.attrs {
            let v = match v {
                Value::String(t) if crate::vector::expr::is_expression(t) => json!(
                    crate::vector::expr::eval(t, &ctx.bindings)
                        .map_err(|e| Stop::Error(format!("modify_qp.attrs.{k}: {e}")))?
                ),
                other => other.clone(),
            };
            attrs.insert(k.clone(), v);
        }
        let what = format!("modify_qp to {}", m.state);
        let reply = self
            .iut
            .agent(json!({"op": "modify_qp", "qpn": qpn, "state": m.state, "attrs": attrs}))?;
        self.refusal_step(
            "modify_qp",
            &what,
            reply,
            m.refused.as_ref().and_then(Refusal::expected),
            &m.requirement,
        )
    }

    /// Judges an agent reply against `refused` (an error code, `any`, or
    /// `None`: the request must succeed). A refusal the vector does not
    /// expect is INCONC; an acceptance it does not expect, or another code
    /// than the one expected, FAILs.
    pub(super) fn refusal_step(
        &mut self,
        kind: &'static str,
        what: &str,
        reply: Value,
        refused: Option<&str>,
        requirement: &Option<String>,
    ) -> Result<(), Stop> {
        let code = match &reply {
            Value::Object(map) if map.get("ok") == Some(&Value::Bool(true)) => None,
            Value::Object(map) => Some(
                map.get("error")
                    .and_then(|e| e.get("code"))
                    .and_then(Value::as_str)
                    .unwrap_or("no code")
                    .to_string(),
            ),
            _ => Some("malformed reply".to_string()),
        };
        match (refused, code) {
            (None, None) => {
                self.record(kind, true, format!("{what}: accepted"));
                Ok(())
            }
            (None, Some(_)) => Err(Stop::Inconc(
                agent_ok(reply, what).err().unwrap_or_default(),
            )),
            (Some(want), Some(got)) if want == "any" || want == got => {
                self.record(kind, true, format!("{what}: refused as required ({got})"));
                Ok(())
            }
            (Some(want), got) => {
                let reason = match got {
                    None => format!("{what}: the agent accepted a request it must refuse ({want})"),
                    Some(got) => format!("{what}: refused with `{got}`, expected `{want}`"),
                };
                self.record(kind, false, reason.clone());
                Err(self.fail(requirement, reason))
            }
        }
    }
}

/// Whether `completions` are the IUT giving up on its own: the first is
/// RETRY_EXC_ERR (the retry budget of a requester whose packets were not
/// acknowledged ran out), the others RETRY_EXC_ERR or WR_FLUSH_ERR (the
/// work requests flushed behind it). Returns what the IUT reported.
fn gave_up(completions: &[Value]) -> Option<String> {
    let status = |c: &Value| {
        c.get("status_name")
            .and_then(Value::as_str)
            .map(str::to_owned)
    };
    let first = completions.first()?;
    if status(first).as_deref() != Some("RETRY_EXC_ERR") {
        return None;
    }
    let rest_ok = completions[1..]
        .iter()
        .all(|c| matches!(status(c).as_deref(), Some("RETRY_EXC_ERR" | "WR_FLUSH_ERR")));
    rest_ok.then(|| format!("the IUT gave up with RETRY_EXC_ERR ({first})"))
}

#[cfg(test)]
mod tests {
    use super::gave_up;
    use serde_json::json;

    #[test]
    fn only_a_retry_budget_running_out_is_giving_up() {
        let exc = json!({"wr_id": 1, "status_name": "RETRY_EXC_ERR"});
        let flush = json!({"wr_id": 2, "status_name": "WR_FLUSH_ERR"});
        let ok = json!({"wr_id": 1, "status_name": "SUCCESS"});
        let rnr = json!({"wr_id": 1, "status_name": "RNR_RETRY_EXC_ERR"});
        assert!(gave_up(std::slice::from_ref(&exc)).is_some());
        assert!(gave_up(&[exc.clone(), flush.clone()]).is_some());
        assert!(gave_up(&[]).is_none());
        assert!(gave_up(std::slice::from_ref(&ok)).is_none());
        assert!(gave_up(&[rnr]).is_none());
        assert!(gave_up(&[flush, exc.clone()]).is_none());
        assert!(gave_up(&[exc, ok]).is_none());
    }
}
