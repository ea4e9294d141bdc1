#include "secure/gcm.hpp"

#include <intel-ipsec-mb.h>

#include <cstring>
#include <new>
#include <utility>

namespace metaroce::secure {

const char* to_string(Algorithm a) noexcept {
  return a == Algorithm::aes128_gcm ? "aes-128-gcm" : "aes-256-gcm";
}

const char* to_string(Protection p) noexcept {
  return p == Protection::encrypt ? "encrypt" : "auth-only";
}

namespace {

// The library's dispatch table, made once for the CPU this runs on (AVX-512
// and VAES where the CPU has them). The direct GCM calls read only its
// function pointers, so every thread may share it.
IMB_MGR* manager() noexcept {
  static IMB_MGR* const m = [] {
    IMB_MGR* made = alloc_mb_mgr(0);
    IMB_ARCH arch{};
    if (made != nullptr) init_mb_mgr_auto(made, &arch);
    if (made != nullptr && imb_get_errno(made) != 0) {
      free_mb_mgr(made);
      made = nullptr;
    }
    return made;
  }();
  return m;
}

// The expanded key on cache lines of its own: intel-ipsec-mb declares it
// 64-byte aligned only when LINUX is defined before its header, which
// Debian's does not require, so the type's own alignment cannot be relied
// on. Every GCM call reads most of its 1,008 bytes; a neighbour written by
// another lcore on one of its lines would cost a miss per call.
constexpr std::size_t key_align = 64;
constexpr std::size_t key_room = (sizeof(gcm_key_data) + key_align - 1) / key_align * key_align;

gcm_key_data* new_key_data() noexcept {
  void* p = ::operator new(key_room, std::align_val_t{key_align}, std::nothrow);
  return p == nullptr ? nullptr : new (p) gcm_key_data;
}

void delete_key_data(gcm_key_data* k) noexcept { ::operator delete(k, std::align_val_t{key_align}); }

// Constant time: how long it takes says nothing of where the tags differ.
bool same_tag(const Tag& a, const Tag& b) noexcept {
  std::uint8_t diff = 0;
  for (std::size_t i = 0; i < tag_bytes; ++i) diff |= static_cast<std::uint8_t>(a[i] ^ b[i]);
  return diff == 0;
}

}  // namespace

Gcm::~Gcm() { release(); }

Gcm::Gcm(Gcm&& other) noexcept : key_(std::exchange(other.key_, nullptr)), algorithm_(other.algorithm_) {}

Gcm& Gcm::operator=(Gcm&& other) noexcept {
  if (this != &other) {
    release();
    key_ = std::exchange(other.key_, nullptr);
    algorithm_ = other.algorithm_;
  }
  return *this;
}

void Gcm::release() noexcept {
  if (key_ != nullptr) {
    // The expanded key is key material too.
    volatile std::uint8_t* p = reinterpret_cast<volatile std::uint8_t*>(key_);
    for (std::size_t i = 0; i < sizeof(gcm_key_data); ++i) p[i] = 0;
    delete_key_data(key_);
  }
  key_ = nullptr;
}

bool Gcm::set_key(Algorithm algorithm, std::span<const std::uint8_t> key) noexcept {
  release();
  IMB_MGR* m = manager();
  if (key.size() != key_bytes(algorithm) || m == nullptr) return false;
  gcm_key_data* k = new_key_data();
  if (k == nullptr) return false;
  if (algorithm == Algorithm::aes128_gcm)
    IMB_AES128_GCM_PRE(m, key.data(), k);
  else
    IMB_AES256_GCM_PRE(m, key.data(), k);
  key_ = k;
  algorithm_ = algorithm;
  return true;
}

bool Gcm::seal(const Nonce& nonce, std::span<const std::uint8_t> aad, std::span<std::uint8_t> data,
               Tag& tag) noexcept {
  return seal_to(nonce, aad, data, data, tag);
}

bool Gcm::seal_to(const Nonce& nonce, std::span<const std::uint8_t> aad, std::span<const std::uint8_t> in,
                  std::span<std::uint8_t> out, Tag& tag) noexcept {
  if (key_ == nullptr || in.size() != out.size()) return false;
  IMB_MGR* m = manager();
  gcm_context_data ctx;
  if (algorithm_ == Algorithm::aes128_gcm)
    IMB_AES128_GCM_ENC(m, key_, &ctx, out.data(), in.data(), in.size(), nonce.data(), aad.data(), aad.size(),
                       tag.data(), tag_bytes);
  else
    IMB_AES256_GCM_ENC(m, key_, &ctx, out.data(), in.data(), in.size(), nonce.data(), aad.data(), aad.size(),
                       tag.data(), tag_bytes);
  return true;
}

bool Gcm::open(const Nonce& nonce, std::span<const std::uint8_t> aad, std::span<std::uint8_t> data,
               const Tag& tag) noexcept {
  return open_to(nonce, aad, data, data, tag);
}

bool Gcm::open_to(const Nonce& nonce, std::span<const std::uint8_t> aad, std::span<const std::uint8_t> in,
                  std::span<std::uint8_t> out, const Tag& tag) noexcept {
  if (key_ == nullptr || in.size() != out.size()) return false;
  IMB_MGR* m = manager();
  gcm_context_data ctx;
  Tag computed{};
  if (algorithm_ == Algorithm::aes128_gcm)
    IMB_AES128_GCM_DEC(m, key_, &ctx, out.data(), in.data(), in.size(), nonce.data(), aad.data(), aad.size(),
                       computed.data(), tag_bytes);
  else
    IMB_AES256_GCM_DEC(m, key_, &ctx, out.data(), in.data(), in.size(), nonce.data(), aad.data(), aad.size(),
                       computed.data(), tag_bytes);
  if (same_tag(computed, tag)) return true;
  // A bad tag in place: the counter-mode keystream is its own inverse, so
  // running the same nonce over the bytes again gives back exactly what was
  // received. Only failing frames pay for it.
  if (!out.empty() && out.data() == in.data()) {
    Tag ignored{};
    (void)seal(nonce, {}, out, ignored);
  }
  return false;
}

bool Gcm::seal_frame(Protection protection, const Nonce& nonce, std::span<std::uint8_t> frame,
                     std::size_t header_bytes, Tag& tag) noexcept {
  if (protection == Protection::auth_only) return seal(nonce, frame, {}, tag);
  if (header_bytes > frame.size()) header_bytes = frame.size();
  return seal(nonce, frame.first(header_bytes), frame.subspan(header_bytes), tag);
}

bool Gcm::seal_frame_from(Protection protection, const Nonce& nonce, std::span<std::uint8_t> frame,
                          std::size_t header_bytes, std::span<const std::uint8_t> plaintext, Tag& tag) noexcept {
  if (protection == Protection::auth_only || header_bytes > frame.size()) return false;
  return seal_to(nonce, frame.first(header_bytes), plaintext, frame.subspan(header_bytes), tag);
}

bool Gcm::open_frame(Protection protection, const Nonce& nonce, std::span<std::uint8_t> frame,
                     std::size_t header_bytes, const Tag& tag) noexcept {
  if (protection == Protection::auth_only) return open_to(nonce, frame, {}, {}, tag);
  if (header_bytes > frame.size()) header_bytes = frame.size();
  return open(nonce, frame.first(header_bytes), frame.subspan(header_bytes), tag);
}

bool Gcm::open_frame_to(Protection protection, const Nonce& nonce, std::span<const std::uint8_t> frame,
                        std::size_t header_bytes, const Tag& tag, std::span<std::uint8_t> plaintext) noexcept {
  if (protection == Protection::auth_only) return open_to(nonce, frame, {}, {}, tag);
  if (header_bytes > frame.size()) header_bytes = frame.size();
  return open_to(nonce, frame.first(header_bytes), frame.subspan(header_bytes), plaintext, tag);
}

}  // namespace metaroce::secure
