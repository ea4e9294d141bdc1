// The IBTA CM messages (cm/ibta_cm.hpp): every attribute encoded and
// decoded back, the fields at the byte offsets of IBTA Vol. 1 12.6 (the
// layout doc/WIRE.md gives), rdma_cm's private data header, and the
// refusals.
#include <gtest/gtest.h>

#include "cm/ibta_cm.hpp"
#include "cm/message.hpp"
#include "wire/frame.hpp"
#include "wire/opcode.hpp"

namespace metaroce::cm::ibta {
namespace {

Message full_req() {
  Message m;
  m.attribute = Attribute::req;
  m.transaction_id = 0x0102030405060708ull;
  m.local_comm_id = 0xa1b2c3d4;
  m.vendor_id = 0x123456;
  m.service_id = rdma_cm_service_id(18515);
  m.local_ca_guid = 0x0011223344556677ull;
  m.local_qkey = 0;
  m.local_qpn = 0xabcdef;
  m.responder_resources = 16;
  m.initiator_depth = 15;
  m.remote_cm_response_timeout = 20;
  m.transport_service_type = 0;
  m.end_to_end_flow_control = true;
  m.starting_psn = 0x654321;
  m.local_cm_response_timeout = 19;
  m.retry_count = 7;
  m.pkey = 0xffff;
  m.path_mtu = mtu_code(1024);
  m.rnr_retry_count = 6;
  m.max_cm_retries = 15;
  m.srq = false;
  m.primary.local_gid = ipv4_gid(0x0a000001);
  m.primary.remote_gid = ipv4_gid(0x0a000002);
  m.primary.flow_label = 0xfedcb;
  m.primary.packet_rate = 0x2a;
  m.primary.traffic_class = 106;
  m.primary.hop_limit = 64;
  m.primary.sl = 3;
  m.primary.subnet_local = false;
  m.primary.local_ack_timeout = 14;
  std::string error;
  EXPECT_TRUE(encode_rdma_cm_private(RdmaCmHeader{4, 49999, 0x0a000001, 0x0a000002},
                                     std::vector<std::uint8_t>{9, 8, 7}, m.private_data, error))
      << error;
  return m;
}

// decode returns the whole private data field: the sender's bytes, zeros after.
Message padded(Message m) {
  m.private_data.resize(private_data_size(m.attribute), 0);
  return m;
}

TEST(IbtaCm, PrivateDataRoomPerAttribute) {
  EXPECT_EQ(private_data_size(Attribute::req), 92u);
  EXPECT_EQ(private_data_size(Attribute::rep), 196u);
  EXPECT_EQ(private_data_size(Attribute::rtu), 224u);
  EXPECT_EQ(private_data_size(Attribute::rej), 148u);
  EXPECT_EQ(private_data_size(Attribute::dreq), 220u);
  EXPECT_EQ(private_data_size(Attribute::drep), 224u);
}

TEST(IbtaCm, RequestFieldsAtTheirOffsets) {
  std::array<std::uint8_t, mad_size> mad{};
  std::string error;
  ASSERT_TRUE(encode_mad(full_req(), mad, error)) << error;
  // MAD common header
  EXPECT_EQ(mad[0], 1);
  EXPECT_EQ(mad[1], 0x07);
  EXPECT_EQ(mad[2], 2);
  EXPECT_EQ(mad[3], 0x03);
  EXPECT_EQ(mad[8], 0x01);
  EXPECT_EQ(mad[15], 0x08);
  EXPECT_EQ(mad[16], 0x00);
  EXPECT_EQ(mad[17], 0x10);
  const std::uint8_t* d = mad.data() + 24;
  EXPECT_EQ(d[0], 0xa1);
  EXPECT_EQ(d[3], 0xd4);
  EXPECT_EQ(d[4], 0);     // reserved
  EXPECT_EQ(d[5], 0x12);  // vendor ID
  EXPECT_EQ(d[7], 0x56);
  EXPECT_EQ(d[8 + 3], 0x00);   // service ID 0x0000000001064853
  EXPECT_EQ(d[8 + 4], 0x01);
  EXPECT_EQ(d[8 + 5], 0x06);
  EXPECT_EQ(d[8 + 6], 0x48);
  EXPECT_EQ(d[8 + 7], 0x53);
  EXPECT_EQ(d[16], 0x00);      // CA GUID
  EXPECT_EQ(d[23], 0x77);
  EXPECT_EQ(d[32], 0xab);      // QPN
  EXPECT_EQ(d[34], 0xef);
  EXPECT_EQ(d[35], 16);        // responder resources
  EXPECT_EQ(d[39], 15);        // initiator depth
  EXPECT_EQ(d[43], (20 << 3) | 1);  // remote CM timeout, RC, flow control
  EXPECT_EQ(d[44], 0x65);      // starting PSN
  EXPECT_EQ(d[46], 0x21);
  EXPECT_EQ(d[47], (19 << 3) | 7);
  EXPECT_EQ(d[48], 0xff);      // P_Key
  EXPECT_EQ(d[49], 0xff);
  EXPECT_EQ(d[50], (3 << 4) | 6);   // MTU 1024, RNR retry 6
  EXPECT_EQ(d[51], 15 << 4);        // max CM retries
  EXPECT_EQ(d[52 + 4 + 10], 0xff);  // local GID ::ffff:10.0.0.1
  EXPECT_EQ(d[52 + 4 + 15], 0x01);
  EXPECT_EQ(d[52 + 20 + 15], 0x02);  // remote GID
  EXPECT_EQ(d[52 + 36], 0xfe);       // flow label 0xfedcb, rate 0x2a
  EXPECT_EQ(d[52 + 38], 0xb0);
  EXPECT_EQ(d[52 + 39], 0x2a);
  EXPECT_EQ(d[52 + 40], 106);
  EXPECT_EQ(d[52 + 41], 64);
  EXPECT_EQ(d[52 + 42], 3 << 4);
  EXPECT_EQ(d[52 + 43], 14 << 3);
  for (std::size_t i = 96; i < 140; ++i) EXPECT_EQ(d[i], 0) << "alternate path byte " << i;
  // private data: rdma_cm's header, then ours
  EXPECT_EQ(d[140], 0);
  EXPECT_EQ(d[141], 0x40);
  EXPECT_EQ(d[142], 49999 >> 8);
  EXPECT_EQ(d[143], 49999 & 0xff);
  EXPECT_EQ(d[140 + 4 + 15], 0x01);
  EXPECT_EQ(d[140 + 20 + 15], 0x02);
  EXPECT_EQ(d[140 + 36], 9);
  EXPECT_EQ(d[140 + 38], 7);
}

TEST(IbtaCm, EveryAttributeRoundTripsThroughAFrame) {
  std::vector<Message> all;
  all.push_back(full_req());
  Message rep;
  rep.attribute = Attribute::rep;
  rep.transaction_id = 0x0102030405060708ull;
  rep.local_comm_id = 0x11111111;
  rep.remote_comm_id = 0xa1b2c3d4;
  rep.local_qpn = 0x123456;
  rep.starting_psn = 0xfffffe;
  rep.responder_resources = 4;
  rep.initiator_depth = 3;
  rep.target_ack_delay = 17;
  rep.failover_accepted = 3;
  rep.end_to_end_flow_control = true;
  rep.rnr_retry_count = 7;
  rep.srq = true;
  rep.local_ca_guid = 0x8877665544332211ull;
  rep.private_data.assign(196, 0x5a);
  all.push_back(rep);
  Message rtu;
  rtu.attribute = Attribute::rtu;
  rtu.local_comm_id = 1;
  rtu.remote_comm_id = 2;
  all.push_back(rtu);
  Message rej;
  rej.attribute = Attribute::rej;
  rej.local_comm_id = 3;
  rej.remote_comm_id = 4;
  rej.message_rejected = 0;
  rej.reason = 28;  // consumer reject
  rej.private_data = {1};
  all.push_back(rej);
  Message dreq;
  dreq.attribute = Attribute::dreq;
  dreq.local_comm_id = 5;
  dreq.remote_comm_id = 6;
  dreq.remote_qpn = 0xabcdef;
  dreq.private_data = {'b', 'y', 'e'};
  all.push_back(dreq);
  Message drep;
  drep.attribute = Attribute::drep;
  drep.local_comm_id = 6;
  drep.remote_comm_id = 5;
  all.push_back(drep);

  transport::Endpoints e;
  e.local_mac = {2, 0, 0, 0, 0, 1};
  e.peer_mac = {2, 0, 0, 0, 0, 2};
  e.local_ipv4 = 0x0a000001;
  e.peer_ipv4 = 0x0a000002;
  for (const Message& m : all) {
    const std::vector<std::uint8_t> frame = build_frame(e, 49151, m);
    ASSERT_FALSE(frame.empty()) << to_string(m.attribute);
    wire::ParsedFrame p;
    ASSERT_EQ(wire::parse_frame(frame, p), wire::ParseError::ok);
    EXPECT_EQ(p.bth.opcode, wire::opcode::ud | wire::opcode::send_only);
    EXPECT_EQ(p.bth.dest_qp, 1u);
    EXPECT_EQ(p.bth.pkey, 0xffff);
    EXPECT_EQ(p.deth.qkey, 0x80010000u);
    EXPECT_EQ(p.deth.src_qp, 1u);
    Message back;
    ASSERT_EQ(decode(p, back), DecodeError::ok) << to_string(m.attribute);
    EXPECT_EQ(back, padded(m)) << to_string(m.attribute);
  }
  RdmaCmHeader h;
  ASSERT_TRUE(decode_rdma_cm_private(full_req().private_data, h));
  EXPECT_EQ(h, (RdmaCmHeader{4, 49999, 0x0a000001, 0x0a000002}));
}

TEST(IbtaCm, RefusesWhatDoesNotFitOrIsNotCm) {
  std::array<std::uint8_t, mad_size> mad{};
  std::string error;
  Message m = full_req();
  m.private_data.assign(93, 1);
  EXPECT_FALSE(encode_mad(m, mad, error));
  EXPECT_EQ(error, "IBTA CM: REQ private data of 93 bytes: at most 92");
  m.attribute = Attribute::mra;
  m.private_data.clear();
  EXPECT_FALSE(encode_mad(m, mad, error));
  std::vector<std::uint8_t> priv;
  EXPECT_FALSE(encode_rdma_cm_private(RdmaCmHeader{}, std::vector<std::uint8_t>(57, 0), priv, error));
  EXPECT_EQ(error, "rdma_cm REQ private data of 57 bytes: at most 56");

  ASSERT_TRUE(encode_mad(full_req(), mad, error));
  Message out;
  EXPECT_EQ(decode_mad(std::span<const std::uint8_t>(mad.data(), 255), out), DecodeError::short_mad);
  auto other = mad;
  other[1] = 0x09;  // metaroce's own CM class
  EXPECT_EQ(decode_mad(other, out), DecodeError::not_cm);
  other = mad;
  other[2] = 1;
  EXPECT_EQ(decode_mad(other, out), DecodeError::not_cm);
  other = mad;
  other[17] = 0x11;  // MRA
  EXPECT_EQ(decode_mad(other, out), DecodeError::bad_attribute);
  other[17] = 0x19;  // LAP
  EXPECT_EQ(decode_mad(other, out), DecodeError::bad_attribute);
  // metaroce's own MAD is not an IBTA CM message, and the reverse
  cm::Message own;
  transport::Endpoints e;
  const std::vector<std::uint8_t> frame = cm::build_frame(e, 49151, own);
  wire::ParsedFrame p;
  ASSERT_EQ(wire::parse_frame(frame, p), wire::ParseError::ok);
  EXPECT_EQ(decode(p, out), DecodeError::not_cm);
  const std::vector<std::uint8_t> ibta_frame = build_frame(e, 49151, full_req());
  ASSERT_EQ(wire::parse_frame(ibta_frame, p), wire::ParseError::ok);
  cm::Message own_out;
  EXPECT_EQ(cm::decode(p, own_out), cm::DecodeError::not_metaroce_mad);
}

TEST(IbtaCm, MtuCodes) {
  EXPECT_EQ(mtu_code(256), 1);
  EXPECT_EQ(mtu_code(4096), 5);
  EXPECT_EQ(mtu_code(1500), 0);
  EXPECT_EQ(mtu_of_code(3), 1024u);
  EXPECT_EQ(mtu_of_code(0), 0u);
  EXPECT_EQ(mtu_of_code(6), 0u);
}

}  // namespace
}  // namespace metaroce::cm::ibta
