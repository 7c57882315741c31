//! A test's setup through the agent: PD, CQ, MRs with their canaries, the
//! QPs to RTS (Base or MP), the receive WRs, and the bindings the steps use.

use super::*;

impl Test<'_> {
    pub(super) fn setup(&mut self) -> Result<(), Stop> {
        let v = self.vector;
        let q = &v.setup.qp;
        let mut rng = SplitMix64::new(self.bed.seed);
        self.setup_call(json!({"op": "reset"}), "reset")?;
        let pd = field_u64(
            &self.setup_call(json!({"op": "alloc_pd"}), "alloc_pd")?,
            "pd",
            "alloc_pd",
        )?;
        let cq = field_u64(
            &self.setup_call(json!({"op": "create_cq"}), "create_cq")?,
            "cq",
            "create_cq",
        )?;
        let mut mrs = BTreeMap::new();
        // `${profile.KEY}`: the IUT's declared MP local constants (§10.3
        // defaults where it declares none), for windows that follow them.
        let mut bindings = crate::run::profile_keys::bindings(&self.bed.profile)
            .map_err(|e| Stop::Error(format!("capability profile: {e}")))?;
        let mut other_pd = None;
        for mr in &v.setup.mrs {
            let mr_pd = if mr.other_pd {
                match other_pd {
                    Some(p) => p,
                    None => {
                        let p = field_u64(
                            &self.setup_call(json!({"op": "alloc_pd"}), "alloc_pd (second PD)")?,
                            "pd",
                            "alloc_pd",
                        )?;
                        other_pd = Some(p);
                        p
                    }
                }
            } else {
                pd
            };
            let mut req = json!({"op": "reg_mr", "pd": mr_pd, "length": mr.length,
                "access": mr.access, "fill": mr.fill});
            if self.bed.canaries {
                req["canary_len"] = CANARY_LEN.into();
                req["canary_fill"] = CANARY_FILL.into();
            }
            if let Some(content) = &mr.content {
                let ctx0 = Context {
                    bindings: bindings.clone(),
                    harness: self.iut.harness(),
                    iut: self.bed.iut,
                    iut_qpn: 0,
                    iut_qpn2: 0,
                    cq,
                    udp_sport: 0,
                    p_key: q.p_key,
                    traffic_class: 0,
                    mrs: BTreeMap::new(),
                    start_ns: 0,
                    margin_ns: 0,
                    counters_at_start: BTreeMap::new(),
                    rtr_attrs: Map::new(),
                };
                let data = bytes(content, &ctx0)
                    .map_err(|e| Stop::Error(format!("setup.mrs.{}: {e}", mr.name)))?;
                req["hex"] = Value::String(hex::encode(&data));
            }
            let what = format!("reg_mr `{}`", mr.name);
            let r = self.setup_call(req, &what)?;
            let h = MrHandle {
                handle: field_u64(&r, "mr", &what)?,
                addr: field_u64(&r, "addr", &what)?,
                len: field_u64(&r, "length", &what)?,
                lkey: field_u64(&r, "lkey", &what)?,
                rkey: field_u64(&r, "rkey", &what)?,
            };
            for (k, val) in [
                ("addr", h.addr),
                ("len", h.len),
                ("lkey", h.lkey),
                ("rkey", h.rkey),
            ] {
                bindings.set(format!("mr.{}.{k}", mr.name), val);
            }
            mrs.insert(mr.name.clone(), h);
        }
        let h_qpn = self.bed.harness_qpn;
        let rq_psn = q.rq_psn.unwrap_or((rng.next_u64() & 0xFF_FFFF) as u32);
        let sq_psn = q.sq_psn.unwrap_or((rng.next_u64() & 0xFF_FFFF) as u32);
        let udp_sport = 0xC000 | (rng.next_u64() & 0x3FFF) as u16;
        let n_qps = if v.setup.second_qp { 2 } else { 1 };
        let mut qpns = Vec::new();
        let mut iut_sport = 0;
        let mut rtr_attrs = Map::new();
        for k in 0..n_qps {
            let what = if k == 0 {
                "the QP under test"
            } else {
                "the second QP"
            };
            let r = self.setup_call(
                json!({"op": "create_qp", "pd": pd, "qp_type": q.qp_type, "send_cq": cq, "recv_cq": cq}),
                &format!("create_qp ({what})"),
            )?;
            let qpn = field_u64(&r, "qpn", "create_qp")?;
            let peer = h_qpn + k;
            let is_ud = q.qp_type == "ud";
            let init = if is_ud {
                json!({"q_key": q.q_key, "p_key": q.p_key})
            } else {
                json!({"access": q.access, "p_key": q.p_key})
            };
            // `setup.qp.state` stops the QP under test early (MR-QP tests).
            let stop = if k == 0 { q.state.as_str() } else { "rts" };
            if stop == "reset" {
                qpns.push(qpn as u32);
                continue;
            }
            self.setup_call(
                json!({"op": "modify_qp", "qpn": qpn, "state": "init", "attrs": init}),
                &format!("modify_qp {what} to INIT"),
            )?;
            if stop == "init" {
                qpns.push(qpn as u32);
                continue;
            }
            let rtr = if is_ud {
                json!({})
            } else {
                let mut a = json!({"dest_qpn": peer, "rq_psn": rq_psn, "pmtu": q.pmtu,
                    "max_dest_rd_atomic": q.max_dest_rd_atomic, "min_rnr_timer": q.min_rnr_timer,
                    "path": {"dest_mac": mac_text(self.iut.harness().mac),
                             "dest_ip": self.iut.harness().ip.to_string(),
                             "traffic_class": q.traffic_class}});
                if k == 0
                    && let Value::Object(m) = &a
                {
                    rtr_attrs = m.clone();
                }
                if v.profile == Profile::Mp {
                    let mp = q.mp.clone().unwrap_or(crate::vector::model::MpSetup {
                        entropy_set_size: 8,
                        window: 1024,
                        trim_dscp: None,
                        ack_dscp: None,
                        entropy_set: None,
                        reorder_threshold: None,
                        peer_resource_nak: None,
                        max_staged_bytes: None,
                        peer_ordered: false,
                    });
                    a["mp"] = Value::Bool(true);
                    a["mp_entropy_set_size"] = mp.entropy_set_size.into();
                    a["mp_window"] = mp.window.into();
                    if let Some(d) = mp.trim_dscp {
                        a["mp_trim_dscp"] = d.into();
                    }
                    if let Some(d) = mp.ack_dscp {
                        a["mp_ack_dscp"] = d.into();
                    }
                    if let Some(set) = &mp.entropy_set {
                        a["mp_entropy_set"] = set.clone().into();
                    }
                    if let Some(k) = mp.reorder_threshold {
                        a["mp_reorder_threshold"] = k.into();
                    }
                    if let Some(rn) = mp.peer_resource_nak {
                        a["mp_peer_resource_nak"] = rn.into();
                    }
                    // Not asked of an IUT that declares that limit already
                    // (its agent need not know the attribute).
                    let declared = self.bed.profile.get("mp_max_staged_bytes");
                    if let Some(b) = mp.max_staged_bytes
                        && declared.and_then(Value::as_u64).unwrap_or(0) != b
                    {
                        a["mp_max_staged_bytes"] = b.into();
                    }
                    if mp.peer_ordered {
                        a["mp_peer_ordered"] = true.into();
                    }
                }
                a
            };
            self.setup_call(
                json!({"op": "modify_qp", "qpn": qpn, "state": "rtr", "attrs": rtr}),
                &format!("modify_qp {what} to RTR"),
            )?;
            if stop == "rtr" {
                qpns.push(qpn as u32);
                continue;
            }
            let rts = if is_ud {
                json!({"sq_psn": sq_psn})
            } else {
                json!({"sq_psn": sq_psn, "timeout": q.timeout, "retry_cnt": q.retry_cnt,
                    "rnr_retry": q.rnr_retry, "max_rd_atomic": q.max_rd_atomic})
            };
            self.setup_call(
                json!({"op": "modify_qp", "qpn": qpn, "state": "rts", "attrs": rts}),
                &format!("modify_qp {what} to RTS"),
            )?;
            if k == 0 {
                let info = self.setup_call(json!({"op": "query_qp", "qpn": qpn}), "query_qp")?;
                match info.get("udp_src_port").and_then(Value::as_u64) {
                    Some(port) => iut_sport = port,
                    // An agent that cannot tell the QP's UDP source port
                    // (AGENT.md: optional) leaves `${iut.udp_sport}` unknown:
                    // a vector that compares against it cannot be judged.
                    None if vector_mentions(self.vector, "iut.udp_sport") => {
                        return Err(Stop::Inconc(
                            "the agent does not report the QP's UDP source port (query_qp \
                             udp_src_port), which this test compares against"
                                .into(),
                        ));
                    }
                    None => {}
                }
                // An MP QP's entropy set, as the IUT reports it (MR-PICS-5):
                // `iut.ev0`, `iut.ev1`, ... and `iut.ev_count`.
                let set: Vec<u64> = info
                    .get("attrs")
                    .and_then(|a| a.get("mp_entropy_set"))
                    .and_then(Value::as_array)
                    .map(|a| a.iter().filter_map(Value::as_u64).collect())
                    .unwrap_or_default();
                bindings.set("iut.ev_count", set.len() as u64);
                for (i, ev) in set.iter().enumerate() {
                    bindings.set(format!("iut.ev{i}"), *ev);
                }
            }
            qpns.push(qpn as u32);
        }
        bindings.set("psn", u64::from(rq_psn));
        bindings.set("iut.psn", u64::from(sq_psn));
        bindings.set("iut.qpn", u64::from(qpns[0]));
        bindings.set("iut.qpn2", u64::from(qpns.get(1).copied().unwrap_or(0)));
        bindings.set("h.qpn", u64::from(h_qpn));
        bindings.set("h.qpn2", u64::from(h_qpn + 1));
        bindings.set("pmtu", u64::from(q.pmtu));
        bindings.set("iut.udp_sport", iut_sport);
        bindings.set("h.ip", u64::from(u32::from(self.iut.harness().ip)));
        bindings.set("iut.ip", u64::from(u32::from(self.bed.iut.ip)));
        let counters = self.read_counters().unwrap_or_default();
        // Whatever came during setup belongs to no step (late frames of an
        // earlier test, frames of the reset): logged, not judged.
        for o in self.iut.drain()? {
            let note = "during setup: ignored".to_string();
            self.log(Direction::Received, o.at_ns, &o.bytes, note);
        }
        self.start_ns = self.iut.now_ns();
        self.ctx = Some(Context {
            bindings,
            harness: self.iut.harness(),
            iut: self.bed.iut,
            iut_qpn: qpns[0],
            iut_qpn2: qpns.get(1).copied().unwrap_or(0),
            cq,
            udp_sport,
            p_key: q.p_key,
            traffic_class: u32::from(q.traffic_class),
            mrs,
            start_ns: self.start_ns,
            margin_ns: self.bed.margin_ns,
            counters_at_start: counters,
            rtr_attrs,
        });
        if q.state != "reset" {
            for r in &v.setup.recvs {
                self.post_recv(r).map_err(Stop::Inconc)?;
            }
        }
        Ok(())
    }

    pub(super) fn read_counters(&mut self) -> Option<BTreeMap<String, u64>> {
        let reply = self.iut.agent(json!({"op": "counters"})).ok()?;
        let map = agent_ok(reply, "counters").ok()?;
        let c = map.get("counters")?.as_object()?;
        Some(
            c.iter()
                .filter_map(|(k, v)| Some((k.clone(), v.as_u64()?)))
                .collect(),
        )
    }

    pub(super) fn sg_json(&self, sg: &[Sge]) -> Result<Value, String> {
        let ctx = self.ctx();
        let mut out = Vec::new();
        for s in sg {
            let mr = ctx
                .mrs
                .get(&s.mr)
                .ok_or_else(|| format!("no MR `{}`", s.mr))?;
            let lkey = match &s.lkey {
                Some(n) => num(n, ctx)?,
                None => mr.lkey,
            };
            out.push(json!({"addr": mr.addr + s.offset, "length": s.length, "lkey": lkey}));
        }
        Ok(Value::Array(out))
    }

    pub(super) fn qpn_for(&self, second: bool) -> u32 {
        if second {
            self.ctx().iut_qpn2
        } else {
            self.ctx().iut_qpn
        }
    }

    pub(super) fn post_recv(&mut self, r: &RecvSetup) -> Result<(), String> {
        let sg = self.sg_json(&r.sg)?;
        let qpn = self.qpn_for(r.second_qp);
        let reply = self
            .iut
            .agent(json!({"op": "post_recv", "qpn": qpn, "wr_id": r.wr_id, "sg_list": sg}))
            .map_err(|e| e.0)?;
        agent_ok(reply, "post_recv").map(drop)
    }
}

/// Whether a binding name appears anywhere in a vector (its steps' fields and
/// expressions, as the loader keeps them).
fn vector_mentions(vector: &Vector, name: &str) -> bool {
    serde_json::to_string(vector).is_ok_and(|text| text.contains(name))
}
