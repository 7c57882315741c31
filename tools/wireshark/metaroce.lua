-- MetaRoCE dissector for Wireshark and tshark (Lua, Wireshark 3.6 or later).
--
-- Wireshark's InfiniBand dissector decodes RoCEv2 (UDP port 4791) but shows
-- the MetaRoCE multipath opcodes 0xC0-0xDF and the CNP (0x81) as
-- "Unknown OpCode" followed by vendor bytes. This plugin takes over UDP port
-- 4791, dissects those opcodes itself (BTH, MPETH, SACKETH, the Base
-- extension headers an MP opcode carries, the CNP) and hands every other
-- packet, unchanged, to the built-in InfiniBand dissector.
--
-- Layouts: spec-model/SPEC.md section 7.2 (MP opcodes, MPETH, SACKETH) and
-- section 6.17 (CNP); the codec's opcode table (codec/src/opcode.rs) is the
-- reference, and conformance/tests/decode/wireshark_dissector.rs checks that this
-- file names every opcode and field as `metaroce decode --format jsonl` does.
-- Filter fields are named after that output's keys: `metaroce.bth.psn`,
-- `metaroce.mpeth.msn`, `metaroce.sacketh.sack_bitmap`, ...
--
-- Install: copy this file into Wireshark's personal Lua plugins folder
-- (Help > About Wireshark > Folders > "Personal Lua Plugins", usually
-- ~/.local/lib/wireshark/plugins/); or for one run:
--     tshark -X lua_script:tools/wireshark/metaroce.lua -r traffic.pcapng
-- (docs/install.md has the details).

local ROCE_PORT = 4791

local metaroce = Proto("metaroce", "MetaRoCE (RoCEv2 multipath and CNP)")

-- ---------------------------------------------------------------------------
-- Opcodes this plugin dissects (names as in codec/src/opcode.rs)
-- ---------------------------------------------------------------------------

-- Extension headers after BTH, in order, and whether a payload may follow.
local LAYOUTS = {
    [0x81] = { name = "CNP", headers = { "cnp" }, data = false },
    [0xC0] = { name = "MP SEND", headers = { "mpeth" }, data = true },
    [0xC1] = { name = "MP SEND with Immediate", headers = { "mpeth", "immdt" }, data = true },
    [0xC2] = { name = "MP WRITE", headers = { "mpeth", "reth" }, data = true },
    [0xC3] = { name = "MP WRITE with Immediate", headers = { "mpeth", "reth", "immdt" }, data = true },
    [0xC4] = { name = "MP READ Request", headers = { "mpeth", "reth" }, data = false },
    [0xC5] = { name = "MP READ Response", headers = { "mpeth" }, data = true },
    [0xC6] = { name = "MP Compare Swap", headers = { "mpeth", "atomic_eth" }, data = false },
    [0xC7] = { name = "MP Fetch Add", headers = { "mpeth", "atomic_eth" }, data = false },
    [0xC8] = { name = "MP Atomic Acknowledge", headers = { "sacketh", "atomic_ack_eth" }, data = false },
    [0xC9] = { name = "MP ACK", headers = { "sacketh" }, data = false },
    [0xCA] = { name = "MP Probe", headers = { "mpeth" }, data = false },
    [0xCB] = { name = "MP SEND with Invalidate", headers = { "mpeth", "ieth" }, data = true },
}
local MP_FIRST, MP_LAST = 0xC0, 0xDF  -- the MP opcode range (SPEC 7.2); 0xCC-0xDF reserved
local OP_CNP = 0x81
local OP_MP_READ_REQUEST, OP_MP_READ_RESPONSE = 0xC4, 0xC5
local OP_MP_COMPARE_SWAP, OP_MP_FETCH_ADD = 0xC6, 0xC7
local OP_MP_ATOMIC_ACK, OP_MP_ACK, OP_MP_PROBE = 0xC8, 0xC9, 0xCA

local opcode_names = {}
for op, layout in pairs(LAYOUTS) do opcode_names[op] = layout.name end

local HEADER_LEN = {
    bth = 12, mpeth = 16, sacketh = 24, reth = 16, immdt = 4, atomic_eth = 28,
    atomic_ack_eth = 8, ieth = 4, cnp = 16,
}
local ICRC_LEN = 4

-- ---------------------------------------------------------------------------
-- Fields (abbreviations = keys of `metaroce decode --format jsonl`)
-- ---------------------------------------------------------------------------

local f = {}
local function field(key, pf) f[key] = pf; return pf end

-- BTH (IBA 9.2; SPEC 4.1)
field("bth.opcode", ProtoField.uint8("metaroce.bth.opcode", "Opcode", base.HEX, opcode_names))
field("bth.opcode_name", ProtoField.string("metaroce.bth.opcode_name", "Opcode name"))
field("bth.se", ProtoField.bool("metaroce.bth.se", "Solicited Event", 8, nil, 0x80))
field("bth.m", ProtoField.bool("metaroce.bth.m", "MigReq", 8, nil, 0x40))
field("bth.pad_count", ProtoField.uint8("metaroce.bth.pad_count", "Pad Count", base.DEC, nil, 0x30))
field("bth.tver", ProtoField.uint8("metaroce.bth.tver", "Header Version", base.DEC, nil, 0x0F))
field("bth.pkey", ProtoField.uint16("metaroce.bth.pkey", "Partition Key", base.HEX))
field("bth.fecn", ProtoField.bool("metaroce.bth.fecn", "FECN", 8, nil, 0x80))
field("bth.becn", ProtoField.bool("metaroce.bth.becn", "BECN", 8, nil, 0x40))
field("bth.resv6a", ProtoField.uint8("metaroce.bth.resv6a", "Reserved (6 bits)", base.HEX, nil, 0x3F))
field("bth.dest_qp", ProtoField.uint24("metaroce.bth.dest_qp", "Destination Queue Pair", base.HEX))
field("bth.ack_req", ProtoField.bool("metaroce.bth.ack_req", "Acknowledge Request", 8, nil, 0x80))
field("bth.resv7", ProtoField.uint8("metaroce.bth.resv7", "Reserved (7 bits)", base.HEX, nil, 0x7F))
field("bth.psn", ProtoField.uint24("metaroce.bth.psn", "Packet Sequence Number", base.DEC))

-- MPETH (SPEC 7.2)
field("mpeth.first", ProtoField.bool("metaroce.mpeth.first", "First (F)", 8, nil, 0x80))
field("mpeth.last", ProtoField.bool("metaroce.mpeth.last", "Last (L)", 8, nil, 0x40))
field("mpeth.retransmission", ProtoField.bool("metaroce.mpeth.retransmission", "Retransmission (R)", 8, nil, 0x20))
field("mpeth.ordered", ProtoField.bool("metaroce.mpeth.ordered", "Ordered (O)", 8, nil, 0x10))
field("mpeth.reserved", ProtoField.uint8("metaroce.mpeth.reserved", "Reserved (4 bits)", base.HEX, nil, 0x0F))
field("mpeth.msn", ProtoField.uint24("metaroce.mpeth.msn", "Message Sequence Number", base.DEC))
field("mpeth.offset", ProtoField.uint32("metaroce.mpeth.offset", "Offset", base.DEC))
field("mpeth.msg_len", ProtoField.uint32("metaroce.mpeth.msg_len", "Message Length", base.DEC))
field("mpeth.timestamp", ProtoField.uint32("metaroce.mpeth.timestamp", "Timestamp (ns mod 2^32)", base.DEC))

-- SACKETH (SPEC 7.2)
local syndrome_names = {}
for v = 0x00, 0x1F do syndrome_names[v] = "ACK, credit code " .. v end
for v = 0x20, 0x3F do syndrome_names[v] = "RNR NAK, timer code " .. (v - 0x20) end
syndrome_names[0x60] = "NAK, PSN sequence error"
syndrome_names[0x61] = "NAK, invalid request"
syndrome_names[0x62] = "NAK, remote access error"
syndrome_names[0x63] = "NAK, remote operational error"
syndrome_names[0x64] = "NAK, invalid RD request"
syndrome_names[0x65] = "NAK, packet trimmed (MP)"
syndrome_names[0x66] = "NAK, resource NAK (MP)"
field("sacketh.syndrome", ProtoField.uint8("metaroce.sacketh.syndrome", "Syndrome", base.HEX, syndrome_names))
field("sacketh.msn", ProtoField.uint24("metaroce.sacketh.msn", "Message Sequence Number", base.DEC))
field("sacketh.ecn_ce", ProtoField.bool("metaroce.sacketh.ecn_ce", "ECN-CE Seen (E)", 8, nil, 0x80))
field("sacketh.retransmission", ProtoField.bool("metaroce.sacketh.retransmission", "Retransmission Echo (R)", 8, nil, 0x40))
field("sacketh.trimmed", ProtoField.bool("metaroce.sacketh.trimmed", "Trimmed (T)", 8, nil, 0x20))
field("sacketh.reserved_flags", ProtoField.uint8("metaroce.sacketh.reserved_flags", "Reserved (5 bits)", base.HEX, nil, 0x1F))
field("sacketh.sack_base_psn", ProtoField.uint24("metaroce.sacketh.sack_base_psn", "SACK Base PSN", base.DEC))
field("sacketh.sack_bitmap", ProtoField.uint64("metaroce.sacketh.sack_bitmap", "SACK Bitmap", base.HEX))
field("sacketh.echoed_entropy", ProtoField.uint16("metaroce.sacketh.echoed_entropy", "Echoed Entropy (UDP source port)", base.DEC))
field("sacketh.reserved", ProtoField.uint16("metaroce.sacketh.reserved", "Reserved (16 bits)", base.HEX))
field("sacketh.echoed_timestamp", ProtoField.uint32("metaroce.sacketh.echoed_timestamp", "Echoed Timestamp", base.DEC))
-- Generated from the bitmap: the PSNs it marks received (one item per run).
local f_sacked = ProtoField.string("metaroce.sacketh.sacked", "Received PSNs")

-- Base extension headers an MP opcode carries (IBA 9.3)
field("reth.va", ProtoField.uint64("metaroce.reth.va", "Virtual Address", base.HEX))
field("reth.rkey", ProtoField.uint32("metaroce.reth.rkey", "Remote Key", base.HEX))
field("reth.dma_len", ProtoField.uint32("metaroce.reth.dma_len", "DMA Length", base.DEC))
field("immdt.value", ProtoField.uint32("metaroce.immdt.value", "Immediate Data", base.HEX))
field("atomic_eth.va", ProtoField.uint64("metaroce.atomic_eth.va", "Virtual Address", base.HEX))
field("atomic_eth.rkey", ProtoField.uint32("metaroce.atomic_eth.rkey", "Remote Key", base.HEX))
field("atomic_eth.swap_add", ProtoField.uint64("metaroce.atomic_eth.swap_add", "Swap (or Add) Data", base.HEX))
field("atomic_eth.compare", ProtoField.uint64("metaroce.atomic_eth.compare", "Compare Data", base.HEX))
field("atomic_ack_eth.orig", ProtoField.uint64("metaroce.atomic_ack_eth.orig", "Original Remote Data", base.HEX))
field("ieth.rkey", ProtoField.uint32("metaroce.ieth.rkey", "Remote Key", base.HEX))

-- CNP (SPEC 6.17)
local f_cnp_reserved = ProtoField.bytes("metaroce.cnp.reserved", "Reserved (16 bytes)")
field("cnp.reserved_zero", ProtoField.bool("metaroce.cnp.reserved_zero", "Reserved bytes all zero"))

-- Body
field("payload_len", ProtoField.uint32("metaroce.payload_len", "Payload Length", base.DEC))
field("pad_len", ProtoField.uint8("metaroce.pad_len", "Pad Length", base.DEC))
field("icrc", ProtoField.uint32("metaroce.icrc", "Invariant CRC (as sent, little-endian)", base.HEX))
local f_payload = ProtoField.bytes("metaroce.payload", "Payload")
local f_pad = ProtoField.bytes("metaroce.pad", "Pad")

local all_fields = { f_sacked, f_cnp_reserved, f_payload, f_pad }
for _, pf in pairs(f) do all_fields[#all_fields + 1] = pf end
metaroce.fields = all_fields

-- ---------------------------------------------------------------------------
-- Expert info: what one packet alone shows is wrong
-- ---------------------------------------------------------------------------

local e = {
    reserved = ProtoExpert.new("metaroce.reserved_set", "Reserved bits set (sent 0, ignored on receipt)",
        expert.group.PROTOCOL, expert.severity.WARN),
    reserved_opcode = ProtoExpert.new("metaroce.reserved_opcode",
        "Opcode reserved for MP: a receiver drops it (MR-MPH-8)", expert.group.PROTOCOL, expert.severity.WARN),
    flags = ProtoExpert.new("metaroce.mpeth.flags_wrong", "MPETH F/L flags disagree with offset and length (MR-MPH-2)",
        expert.group.PROTOCOL, expert.severity.WARN),
    ack_req = ProtoExpert.new("metaroce.bth.ack_req_missing", "AckReq not set (MR-MPH-9)",
        expert.group.PROTOCOL, expert.severity.WARN),
    mp_ack_bth = ProtoExpert.new("metaroce.bth.mp_ack_fields", "MP ACK BTH fields not as required (MR-MPH-6)",
        expert.group.PROTOCOL, expert.severity.WARN),
    sack_base = ProtoExpert.new("metaroce.sacketh.base_wrong", "SACK bitmap inconsistent with its base (MR-MPA-4)",
        expert.group.PROTOCOL, expert.severity.WARN),
    syndrome = ProtoExpert.new("metaroce.sacketh.syndrome_wrong", "Syndrome not allowed in MP",
        expert.group.PROTOCOL, expert.severity.WARN),
    cnp = ProtoExpert.new("metaroce.cnp.fields_wrong", "CNP field not as required (MR-CNP-3)",
        expert.group.PROTOCOL, expert.severity.WARN),
    payload = ProtoExpert.new("metaroce.payload_unexpected", "Payload on an opcode that carries none",
        expert.group.MALFORMED, expert.severity.WARN),
    truncated = ProtoExpert.new("metaroce.truncated", "Packet too short",
        expert.group.MALFORMED, expert.severity.ERROR),
}
metaroce.experts = { e.reserved, e.reserved_opcode, e.flags, e.ack_req, e.mp_ack_bth, e.sack_base,
    e.syndrome, e.cnp, e.payload, e.truncated }

-- ---------------------------------------------------------------------------
-- Helpers
-- ---------------------------------------------------------------------------

local PSN_MOD = 0x1000000

-- (a - b) mod 2^24
local function psn_distance(a, b) return (a - b) % PSN_MOD end

-- Bit `i` (0 = most significant) of an 8-byte range.
local function bitmap_bit(range, i)
    local byte = range:range(math.floor(i / 8), 1):uint()
    return math.floor(byte / 2 ^ (7 - i % 8)) % 2 == 1
end

-- The PSNs marked received, as "a-b, c, ..." (at most 64 of them).
local function sacked_runs(range, base_psn)
    local runs, start = {}, nil
    for i = 0, 64 do
        local set = i < 64 and bitmap_bit(range, i)
        if set and start == nil then start = i end
        if not set and start ~= nil then
            local a, b = (base_psn + start) % PSN_MOD, (base_psn + i - 1) % PSN_MOD
            runs[#runs + 1] = (a == b) and tostring(a) or (a .. "-" .. b)
            start = nil
        end
    end
    if #runs == 0 then return "none" end
    return table.concat(runs, ", ")
end

-- ---------------------------------------------------------------------------
-- Headers
-- ---------------------------------------------------------------------------

local function dissect_bth(tvb, tree, pkt)
    local t = tree:add(metaroce, tvb:range(0, 12), "Base Transport Header (BTH)")
    local op = tvb:range(0, 1)
    t:add(f["bth.opcode"], op)
    t:add(f["bth.opcode_name"], op, pkt.name):set_generated()
    local b1, b4, b8 = tvb:range(1, 1), tvb:range(4, 1), tvb:range(8, 1)
    t:add(f["bth.se"], b1)
    t:add(f["bth.m"], b1)
    t:add(f["bth.pad_count"], b1)
    t:add(f["bth.tver"], b1)
    t:add(f["bth.pkey"], tvb:range(2, 2))
    t:add(f["bth.fecn"], b4)
    t:add(f["bth.becn"], b4)
    local r6 = t:add(f["bth.resv6a"], b4)
    t:add(f["bth.dest_qp"], tvb:range(5, 3))
    t:add(f["bth.ack_req"], b8)
    local r7 = t:add(f["bth.resv7"], b8)
    t:add(f["bth.psn"], tvb:range(9, 3))
    pkt.se = b1:bitfield(0, 1) == 1
    pkt.m = b1:bitfield(1, 1) == 1
    pkt.pad_count = b1:bitfield(2, 2)
    pkt.tver = b1:bitfield(4, 4)
    pkt.fecn = b4:bitfield(0, 1) == 1
    pkt.becn = b4:bitfield(1, 1) == 1
    pkt.ack_req = b8:bitfield(0, 1) == 1
    pkt.qp = tvb:range(5, 3):uint()
    pkt.psn = tvb:range(9, 3):uint()
    -- Reserved BTH bits: MetaRoCE follows IBA (sent 0, ignored), except that
    -- the CNP's reserved bits are judged below.
    if b4:bitfield(2, 6) ~= 0 then r6:add_proto_expert_info(e.reserved) end
    if b8:bitfield(1, 7) ~= 0 then r7:add_proto_expert_info(e.reserved) end
    return t
end

local function dissect_mpeth(range, tree, pkt)
    local t = tree:add(metaroce, range, "Multipath ETH (MPETH)")
    local b0 = range:range(0, 1)
    t:add(f["mpeth.first"], b0)
    t:add(f["mpeth.last"], b0)
    t:add(f["mpeth.retransmission"], b0)
    t:add(f["mpeth.ordered"], b0)
    local resv = t:add(f["mpeth.reserved"], b0)
    t:add(f["mpeth.msn"], range:range(1, 3))
    t:add(f["mpeth.offset"], range:range(4, 4))
    t:add(f["mpeth.msg_len"], range:range(8, 4))
    t:add(f["mpeth.timestamp"], range:range(12, 4))
    if b0:bitfield(4, 4) ~= 0 then resv:add_proto_expert_info(e.reserved) end
    pkt.mpeth = {
        first = b0:bitfield(0, 1) == 1,
        last = b0:bitfield(1, 1) == 1,
        retransmission = b0:bitfield(2, 1) == 1,
        msn = range:range(1, 3):uint(),
        offset = range:range(4, 4):uint(),
        msg_len = range:range(8, 4):uint(),
        tree = t,
    }
end

local function dissect_sacketh(range, tree, pkt)
    local t = tree:add(metaroce, range, "Selective ACK ETH (SACKETH)")
    local syn = t:add(f["sacketh.syndrome"], range:range(0, 1))
    t:add(f["sacketh.msn"], range:range(1, 3))
    local b4 = range:range(4, 1)
    t:add(f["sacketh.ecn_ce"], b4)
    t:add(f["sacketh.retransmission"], b4)
    t:add(f["sacketh.trimmed"], b4)
    local resv_flags = t:add(f["sacketh.reserved_flags"], b4)
    t:add(f["sacketh.sack_base_psn"], range:range(5, 3))
    local bitmap_range = range:range(8, 8)
    local bm = t:add(f["sacketh.sack_bitmap"], bitmap_range)
    local base_psn = range:range(5, 3):uint()
    bm:add(f_sacked, bitmap_range, sacked_runs(bitmap_range, base_psn)):set_generated()
    t:add(f["sacketh.echoed_entropy"], range:range(16, 2))
    local resv = t:add(f["sacketh.reserved"], range:range(18, 2))
    t:add(f["sacketh.echoed_timestamp"], range:range(20, 4))
    if b4:bitfield(3, 5) ~= 0 then resv_flags:add_proto_expert_info(e.reserved) end
    if range:range(18, 2):uint() ~= 0 then resv:add_proto_expert_info(e.reserved) end

    local syndrome = range:range(0, 1):uint()
    -- MR-MPA-8: an acknowledging MP ACK or Atomic Acknowledge uses 0x1F.
    if syndrome < 0x1F then
        syn:add_proto_expert_info(e.syndrome,
            string.format("ACK syndrome 0x%02x, MP uses 0x1F (no end-to-end credits; MR-MPA-8)", syndrome))
    elseif syndrome == 0x60 then
        syn:add_proto_expert_info(e.syndrome, "NAK code 0 (PSN sequence error) is not sent in MP (MR-MPL-9)")
    end
    -- SACK base rule (SPEC 7.6): in an MP ACK with an ACK syndrome the base is
    -- c + 1, or t - 63 when the trigger t is later than c + 64, where c (the
    -- BTH PSN) is the cumulative ACK PSN. Either way the base is later than c;
    -- and when it is c + 1 its bit is 0, or c would have been c + 1.
    if pkt.opcode == OP_MP_ACK and syndrome <= 0x1F then
        local d = psn_distance(base_psn, pkt.psn)
        if d == 0 or d >= PSN_MOD / 2 then
            bm:add_proto_expert_info(e.sack_base, string.format(
                "SACK base PSN %d is not later than the cumulative ACK PSN %d (MR-MPA-4)", base_psn, pkt.psn))
        elseif d == 1 and bitmap_bit(bitmap_range, 0) then
            bm:add_proto_expert_info(e.sack_base, string.format(
                "Bitmap bit 0 marks PSN %d received, but the cumulative ACK PSN is %d (MR-MPA-4)",
                base_psn, pkt.psn))
        end
    end
    pkt.sacketh = { syndrome = syndrome, tree = t }
end

local function dissect_simple(key, range, tree)
    if key == "reth" then
        local t = tree:add(metaroce, range, "RDMA ETH (RETH)")
        t:add(f["reth.va"], range:range(0, 8))
        t:add(f["reth.rkey"], range:range(8, 4))
        t:add(f["reth.dma_len"], range:range(12, 4))
    elseif key == "immdt" then
        local t = tree:add(metaroce, range, "Immediate Data (ImmDt)")
        t:add(f["immdt.value"], range)
    elseif key == "atomic_eth" then
        local t = tree:add(metaroce, range, "Atomic ETH (AtomicETH)")
        t:add(f["atomic_eth.va"], range:range(0, 8))
        t:add(f["atomic_eth.rkey"], range:range(8, 4))
        t:add(f["atomic_eth.swap_add"], range:range(12, 8))
        t:add(f["atomic_eth.compare"], range:range(20, 8))
    elseif key == "atomic_ack_eth" then
        local t = tree:add(metaroce, range, "Atomic ACK ETH (AtomicAckETH)")
        t:add(f["atomic_ack_eth.orig"], range)
    elseif key == "ieth" then
        local t = tree:add(metaroce, range, "Invalidate ETH (IETH)")
        t:add(f["ieth.rkey"], range)
    end
end

local function dissect_cnp(range, tree, pkt)
    local t = tree:add(metaroce, range, "Congestion Notification Packet (CNP)")
    local zero = true
    for i = 0, 15 do
        if range:range(i, 1):uint() ~= 0 then zero = false end
    end
    local r = t:add(f_cnp_reserved, range)
    t:add(f["cnp.reserved_zero"], range, zero):set_generated()
    if not zero then r:add_proto_expert_info(e.cnp, "CNP reserved bytes not zero (MR-CNP-3)") end
    -- MR-CNP-3: SE, M, PadCnt, TVer, FECN, AckReq 0; BECN 1; PSN 0.
    local wrong = {}
    if pkt.se then wrong[#wrong + 1] = "SE 1" end
    if pkt.m then wrong[#wrong + 1] = "M 1" end
    if pkt.pad_count ~= 0 then wrong[#wrong + 1] = "PadCnt " .. pkt.pad_count end
    if pkt.tver ~= 0 then wrong[#wrong + 1] = "TVer " .. pkt.tver end
    if pkt.fecn then wrong[#wrong + 1] = "FECN 1" end
    if not pkt.becn then wrong[#wrong + 1] = "BECN 0" end
    if pkt.ack_req then wrong[#wrong + 1] = "AckReq 1" end
    if pkt.psn ~= 0 then wrong[#wrong + 1] = "PSN " .. pkt.psn end
    if #wrong > 0 then
        pkt.bth_tree:add_proto_expert_info(e.cnp, "CNP with " .. table.concat(wrong, ", ") .. " (MR-CNP-3)")
    end
end

-- Checks on an MP packet's flags that need the payload length (MR-MPH-2, -6, -9).
local function check_mp(pkt, payload_len)
    local op, m = pkt.opcode, pkt.mpeth
    if m ~= nil and op ~= OP_MP_READ_REQUEST then
        local want_first, want_last
        if op == OP_MP_PROBE then
            want_first, want_last = false, false
        elseif op == OP_MP_COMPARE_SWAP or op == OP_MP_FETCH_ADD then
            want_first, want_last = true, true
        else
            want_first = m.offset == 0
            want_last = m.offset + payload_len == m.msg_len
        end
        if m.first ~= want_first or m.last ~= want_last then
            m.tree:add_proto_expert_info(e.flags, string.format(
                "F %d L %d with offset %d, %d payload bytes, message length %d (MR-MPH-2)",
                m.first and 1 or 0, m.last and 1 or 0, m.offset, payload_len, m.msg_len))
        end
    end
    -- MR-MPH-9: a requester sets AckReq with L, in retransmissions and probes.
    if m ~= nil and op ~= OP_MP_READ_RESPONSE and not pkt.ack_req
        and (m.last or m.retransmission or op == OP_MP_PROBE) then
        pkt.bth_tree:add_proto_expert_info(e.ack_req, "AckReq 0 in a request with L or R set, or a probe (MR-MPH-9)")
    end
    -- MR-MPH-6: MP ACK and MP Atomic Acknowledge have AckReq 0, SE 0, PadCnt 0.
    if (op == OP_MP_ACK or op == OP_MP_ATOMIC_ACK) and (pkt.ack_req or pkt.se or pkt.pad_count ~= 0) then
        pkt.bth_tree:add_proto_expert_info(e.mp_ack_bth, "MP ACK with AckReq, SE or PadCnt not 0 (MR-MPH-6)")
    end
end

-- ---------------------------------------------------------------------------
-- The dissector
-- ---------------------------------------------------------------------------

local function is_ours(op)
    return op == OP_CNP or (op >= MP_FIRST and op <= MP_LAST)
end

local function dissect_metaroce(tvb, pinfo, tree, op)
    local layout = LAYOUTS[op]
    local pkt = { opcode = op, name = layout and layout.name or string.format("MP reserved opcode 0x%02X", op) }
    pinfo.cols.protocol:set("MetaRoCE")
    local root = tree:add(metaroce, tvb:range(0, tvb:len()), "MetaRoCE, " .. pkt.name)
    local len = tvb:len()
    if len < HEADER_LEN.bth + ICRC_LEN then
        root:add_proto_expert_info(e.truncated, string.format("%d bytes: BTH and ICRC need %d", len, 16))
        pinfo.cols.info:set(pkt.name .. " [truncated]")
        return len
    end
    pkt.bth_tree = dissect_bth(tvb, root, pkt)
    local info = { string.format("%s QP=0x%06x PSN=%d", pkt.name, pkt.qp, pkt.psn) }
    if layout == nil then
        pkt.bth_tree:add_proto_expert_info(e.reserved_opcode)
    end

    local at = HEADER_LEN.bth
    for _, key in ipairs(layout and layout.headers or {}) do
        local need = HEADER_LEN[key]
        if len - at < need + ICRC_LEN then
            root:add_proto_expert_info(e.truncated, string.format(
                "%s needs %d bytes at offset %d and the ICRC 4 more; %d remain", key, need, at, len - at))
            pinfo.cols.info:set(table.concat(info, " ") .. " [truncated]")
            return len
        end
        local range = tvb:range(at, need)
        if key == "mpeth" then
            dissect_mpeth(range, root, pkt)
        elseif key == "sacketh" then
            dissect_sacketh(range, root, pkt)
        elseif key == "cnp" then
            dissect_cnp(range, root, pkt)
        else
            dissect_simple(key, range, root)
        end
        at = at + need
    end

    local body = len - at - ICRC_LEN
    if body < pkt.pad_count then
        pkt.bth_tree:add_proto_expert_info(e.truncated, string.format(
            "Pad count %d exceeds the %d bytes between the headers and the ICRC", pkt.pad_count, body))
        pinfo.cols.info:set(table.concat(info, " ") .. " [malformed]")
        return len
    end
    local payload_len = body - pkt.pad_count
    local pl = root:add(f["payload_len"], tvb:range(at, body), payload_len)
    pl:set_generated()
    root:add(f["pad_len"], tvb:range(at + payload_len, pkt.pad_count), pkt.pad_count):set_generated()
    if payload_len > 0 then
        local item = root:add(f_payload, tvb:range(at, payload_len))
        if layout ~= nil and not layout.data then item:add_proto_expert_info(e.payload) end
    end
    if pkt.pad_count > 0 then root:add(f_pad, tvb:range(at + payload_len, pkt.pad_count)) end
    root:add_le(f["icrc"], tvb:range(len - ICRC_LEN, ICRC_LEN))

    if pkt.mpeth ~= nil then
        local m = pkt.mpeth
        local flags = (m.first and "F" or "") .. (m.last and "L" or "") .. (m.retransmission and "R" or "")
        info[#info + 1] = string.format("MSN=%d Off=%d Len=%d", m.msn, m.offset, m.msg_len)
        if flags ~= "" then info[#info + 1] = "[" .. flags .. "]" end
    end
    if pkt.sacketh ~= nil then
        local s = pkt.sacketh
        info[#info + 1] = string.format("Syndrome=0x%02x %s", s.syndrome, syndrome_names[s.syndrome] or "reserved")
    end
    if layout ~= nil and op ~= OP_CNP then check_mp(pkt, payload_len) end
    pinfo.cols.info:set(table.concat(info, " "))
    return len
end

-- Wireshark's own RoCEv2 dissector, to which every other opcode goes.
local udp_table = DissectorTable.get("udp.port")
local infiniband = udp_table:get_dissector(ROCE_PORT) or Dissector.get("infiniband")

function metaroce.dissector(tvb, pinfo, tree)
    if tvb:len() >= 1 and is_ours(tvb:range(0, 1):uint()) then
        return dissect_metaroce(tvb, pinfo, tree, tvb:range(0, 1):uint())
    end
    -- A malformed Base packet makes the built-in dissector throw; it has
    -- already marked the packet [Malformed Packet], so the error stops here
    -- instead of turning into a second, misleading "Lua Error" item.
    local ok, consumed = pcall(infiniband.call, infiniband, tvb, pinfo, tree)
    return ok and consumed or tvb:len()
end

udp_table:add(ROCE_PORT, metaroce)
