//! The steps that observe: expected and forbidden frames, completions,
//! memory, and the canaries around every MR.

use super::*;

impl Test<'_> {
    /// The next frame before `deadline`: pending ones first. Frames that
    /// are not RoCE (ARP, neighbour discovery on a real link) are logged and
    /// skipped.
    pub(super) fn next_frame(&mut self, deadline: u64) -> Result<Option<(Observed, Value)>, Stop> {
        loop {
            let o = match self.pending.pop_front() {
                Some(o) => o,
                None => match self.iut.recv(deadline)? {
                    Some(o) => o,
                    None => return Ok(None),
                },
            };
            let mut view = frame_view(&o.bytes);
            // `at_ns`: when the frame came, in ns since the test began
            // (for timing matchers and captures).
            if let Value::Object(map) = &mut view {
                map.insert("at_ns".into(), json!(o.at_ns.saturating_sub(self.start_ns)));
            }
            let roce = view.get("roce") == Some(&Value::Bool(true));
            let error = view.get("error").is_some_and(|e| !e.is_null());
            if !roce && !error {
                self.log(
                    Direction::Received,
                    o.at_ns,
                    &o.bytes,
                    "not RoCE: ignored".into(),
                );
                continue;
            }
            let dest = lookup(&view, "bth.dest_qp").and_then(Value::as_u64);
            if dest.is_some_and(|q| self.bed.stale_qpns.contains(&(q as u32))) {
                let note = "late, for an earlier test's QP: ignored".to_string();
                self.log(Direction::Received, o.at_ns, &o.bytes, note);
                continue;
            }
            return Ok(Some((o, view)));
        }
    }

    /// A waiting window as a reason states it: the vector's window, plus
    /// the test bed's margin on a live IUT.
    pub(super) fn window_text(&self, within_us: u64) -> String {
        if self.bed.margin_ns == 0 {
            format!("{within_us} µs")
        } else {
            format!(
                "{within_us} µs (+ {} µs window margin)",
                self.bed.margin_ns / 1_000
            )
        }
    }

    pub(super) fn expect(&mut self, e: &ExpectStep) -> Result<(), Stop> {
        let within_us = self.window_us(&e.within_us)?;
        let deadline = self.deadline(within_us);
        // MR-MPL-11 and the like: a match after this passes the step but
        // fails the weaker requirement.
        let late = match &e.late {
            Some(l) => {
                let us = self.window_us(&l.after_us)?;
                Some((self.deadline(us), us, l.requirement.clone()))
            }
            None => None,
        };
        let count = e.count.unwrap_or(1).max(1);
        for n in 0..count {
            let mut skipped = 0u32;
            loop {
                let Some((o, view)) = self.next_frame(deadline)? else {
                    let want: Vec<String> = e.fields.keys().cloned().collect();
                    let reason = format!(
                        "expected a packet ({}{}), nothing arrived within {}",
                        want.join(", "),
                        if count > 1 {
                            format!("; {n} of {count} came")
                        } else {
                            String::new()
                        },
                        self.window_text(within_us)
                    );
                    self.record("expect", false, reason.clone());
                    return Err(self.fail(&e.requirement, reason));
                };
                match check_fields(&view, &e.fields, self.ctx()) {
                    Ok(()) => {
                        if let Some((bound, us, requirement)) = &late
                            && o.at_ns > *bound
                            && self.late.is_none()
                        {
                            self.late = Some((
                                requirement.clone(),
                                format!(
                                    "{} arrived later than {} (step {})",
                                    summary(&view),
                                    self.window_text(*us),
                                    self.step.unwrap_or(0)
                                ),
                            ));
                        }
                        self.set_anchor(o.at_ns);
                        self.log(
                            Direction::Received,
                            o.at_ns,
                            &o.bytes,
                            "expected: matched".into(),
                        );
                        for (name, path) in &e.capture {
                            let value =
                                lookup(&view, path).and_then(Value::as_u64).ok_or_else(|| {
                                    Stop::Error(format!(
                                        "capture `{name}`: the packet has no number at `{path}`"
                                    ))
                                })?;
                            if let Some(ctx) = self.ctx.as_mut() {
                                ctx.bindings.set(name.clone(), value);
                            }
                        }
                        break;
                    }
                    Err(misses)
                        if e.skip_unmatched && e.max_skipped.is_none_or(|m| skipped < m) =>
                    {
                        skipped += 1;
                        self.log(
                            Direction::Received,
                            o.at_ns,
                            &o.bytes,
                            format!("skipped (allowed): {}", misses.join("; ")),
                        );
                    }
                    Err(misses) => {
                        let reason = format!("{}: {}", summary(&view), misses.join("; "));
                        self.log(
                            Direction::Received,
                            o.at_ns,
                            &o.bytes,
                            format!("expected other: {}", misses.join("; ")),
                        );
                        self.record("expect", false, reason.clone());
                        return Err(self.fail(&e.requirement, reason));
                    }
                }
            }
        }
        let sum = self
            .packets
            .last()
            .map(|p| p.summary.clone())
            .unwrap_or_default();
        self.record("expect", true, sum);
        Ok(())
    }

    pub(super) fn expect_none(&mut self, e: &ExpectNoneStep) -> Result<(), Stop> {
        let within_us = self.window_us(&e.within_us)?;
        // A quiet window that bounds a timer from below shrinks on a live
        // IUT by the margin (delays only make packets look later); one that
        // says "never answered" grows by it, so a delayed answer is still
        // seen. The lower bound runs from the frame that started the timer
        // (the harness's latest send, or the IUT frame the latest `expect`
        // matched), not from when the harness got to this step: a harness
        // that reached it late would otherwise judge a packet sent on time
        // early (D2). A frame is then judged by when it arrived.
        // `from_step` names an earlier frame that started the timer.
        let anchor = match e.from_step {
            Some(i) => Some(*self.step_anchors.get(&i).ok_or_else(|| {
                Stop::Error(format!("expect_none.from_step: step {i} set no time"))
            })?),
            None => self.anchor().map(|(_, t)| t),
        };
        let now = anchor
            .filter(|_| e.lower_bound)
            .map_or_else(|| self.iut.now_ns(), |a| a.min(self.iut.now_ns()));
        let window = within_us.saturating_mul(1_000);
        let deadline = if e.lower_bound {
            if !self.iut.virtual_time() && window <= self.bed.margin_ns {
                return Err(Stop::Inconc(format!(
                    "a {within_us} µs lower bound on a timer cannot be judged on this test bed (window margin {} µs)",
                    self.bed.margin_ns / 1_000
                )));
            }
            if !self.iut.virtual_time()
                && let Some(i) = self.step
            {
                self.quiet_end = Some((i, now.saturating_add(window)));
            }
            now.saturating_add(
                window
                    - if self.iut.virtual_time() {
                        0
                    } else {
                        self.bed.margin_ns
                    },
            )
        } else {
            self.deadline(within_us)
        };
        // The window grown by the margin, from the frame that opened it: a
        // harness that reached this step late (a slow build judging a long
        // burst) must not count a frame that came after it, such as a
        // retransmission at the IUT's declared RTO. Only a frame of the step
        // just before opens it (after an agent step the window runs from
        // when the harness got here, as before).
        let opened_by_previous = self
            .anchor()
            .filter(|&(i, _)| self.step.is_some_and(|s| s > 0 && i == s - 1));
        let window_end = opened_by_previous
            .filter(|_| !e.lower_bound && !self.iut.virtual_time())
            .map(|(_, a)| a.saturating_add(window).saturating_add(self.bed.margin_ns));
        // A live harness late past its deadline still looks once at its
        // socket (`iut::raw`): what it takes then carries the kernel's
        // arrival time; a frame that came after the window is the next
        // step's, one that came inside it is judged here.
        let live = !self.iut.virtual_time();
        while let Some((o, view)) = self.next_frame(deadline)? {
            let after = o.at_ns >= deadline && (e.lower_bound || live);
            if after || window_end.is_some_and(|w| o.at_ns >= w) {
                // After the quiet window: the next step's.
                self.pending.push_front(o);
                break;
            }
            if e.fields.is_empty() || check_fields(&view, &e.fields, self.ctx()).is_ok() {
                let reason = format!(
                    "no packet may arrive within {within_us} µs; got {}",
                    summary(&view)
                );
                self.log(
                    Direction::Received,
                    o.at_ns,
                    &o.bytes,
                    "must not arrive".into(),
                );
                self.record("expect_none", false, reason.clone());
                return Err(self.fail(&e.requirement, reason));
            }
            self.log(
                Direction::Received,
                o.at_ns,
                &o.bytes,
                "not matching expect_none: ignored".into(),
            );
        }
        self.record("expect_none", true, format!("nothing in {within_us} µs"));
        Ok(())
    }

    pub(super) fn expect_completion(&mut self, c: &CompletionStep) -> Result<(), Stop> {
        let within_us = self.window_us(&c.within_us)?;
        let ctx = self.ctx();
        let req = json!({"op": "poll_cq", "cq": ctx.cq, "max": 1,
            "wait_ms": wait_ms(within_us * 1_000 + self.bed.margin_ns)});
        let reply = self.iut.agent(req)?;
        let map = agent_ok(reply, "poll_cq").map_err(Stop::Error)?;
        let got = map
            .get("completions")
            .and_then(Value::as_array)
            .and_then(|a| a.first())
            .cloned();
        let Some(wc) = got else {
            let reason = format!(
                "expected a completion, none within {}",
                self.window_text(within_us)
            );
            self.record("expect_completion", false, reason.clone());
            return Err(self.fail(&c.requirement, reason));
        };
        match check_fields(&wc, &c.fields, self.ctx()) {
            Ok(()) => {
                self.record("expect_completion", true, wc.to_string());
                Ok(())
            }
            Err(misses) => {
                let reason = format!("completion {wc}: {}", misses.join("; "));
                self.record("expect_completion", false, reason.clone());
                Err(self.fail(&c.requirement, reason))
            }
        }
    }

    /// Every MR's canaries must be as the setup left them (MR-SEC-4: no
    /// byte outside the region is read or written... written, here).
    pub(super) fn check_canaries(&mut self) -> Result<(), Stop> {
        let mrs: Vec<(String, MrHandle)> = self
            .ctx()
            .mrs
            .iter()
            .filter(|(k, _)| !self.deregistered.contains(*k))
            .map(|(k, v)| (k.clone(), *v))
            .collect();
        for (name, mr) in mrs {
            let reply = self
                .iut
                .agent(json!({"op": "read_canary", "mr": mr.handle}))?;
            let map = agent_ok(reply, "read_canary").map_err(Stop::Error)?;
            for side in ["before", "after"] {
                let bytes = map
                    .get(side)
                    .and_then(Value::as_str)
                    .map(hex::decode)
                    .transpose()
                    .map_err(Stop::Error)?
                    .unwrap_or_default();
                if let Some(i) = bytes.iter().position(|&b| b != CANARY_FILL) {
                    let changed = bytes.iter().filter(|&&b| b != CANARY_FILL).count();
                    let offset = if side == "before" {
                        format!("{} bytes before its start", bytes.len() - i)
                    } else {
                        format!("{} bytes after its end", i + 1)
                    };
                    let reason = format!(
                        "memory outside MR `{name}` was written: {changed} canary byte(s) {side} it changed, the first {offset} ({:#04x}, was {CANARY_FILL:#04x})",
                        bytes[i]
                    );
                    self.record("canaries", false, reason.clone());
                    return Err(Stop::Fail {
                        requirement: "MR-SEC-4".into(),
                        reason,
                    });
                }
            }
        }
        if !self.ctx().mrs.is_empty() {
            self.record(
                "canaries",
                true,
                format!("{CANARY_LEN} canary bytes on each side of every MR intact"),
            );
        }
        Ok(())
    }

    pub(super) fn expect_memory(&mut self, m: &MemoryStep) -> Result<(), Stop> {
        let ctx = self.ctx();
        let mr = *ctx
            .mrs
            .get(&m.mr)
            .ok_or_else(|| Stop::Error(format!("no MR `{}`", m.mr)))?;
        let want = bytes(&m.bytes, ctx).map_err(|e| Stop::Error(format!("expect_memory: {e}")))?;
        let reply = self
            .iut
            .agent(json!({"op": "read_mr", "mr": mr.handle, "offset": m.offset,
            "length": want.len()}))?;
        let map = agent_ok(reply, "read_mr").map_err(Stop::Inconc)?;
        let got = map
            .get("hex")
            .and_then(Value::as_str)
            .map(hex::decode)
            .transpose()
            .map_err(Stop::Error)?
            .unwrap_or_default();
        if let Some(i) = (0..want.len()).find(|&i| got.get(i) != Some(&want[i])) {
            let reason = format!(
                "{} at offset {}: expected {:#04x}, found {} ({} of {} bytes differ)",
                m.mr,
                m.offset + i as u64,
                want[i],
                got.get(i).map_or("nothing".into(), |b| format!("{b:#04x}")),
                (0..want.len())
                    .filter(|&j| got.get(j) != Some(&want[j]))
                    .count(),
                want.len()
            );
            self.record("expect_memory", false, reason.clone());
            return Err(self.fail(&m.requirement, reason));
        }
        self.record(
            "expect_memory",
            true,
            format!("{} bytes of {} at {}", want.len(), m.mr, m.offset),
        );
        Ok(())
    }
}
