#include "collectives/bootstrap/job_token.h"

#include <openssl/crypto.h>
#include <openssl/hmac.h>
#include <sys/random.h>

#include <cerrno>
#include <cstring>

#include "base/error.h"

namespace dp {

std::string random_bytes(size_t n) {
  std::string out(n, '\0');
  size_t got = 0;
  while (got < n) {
    ssize_t k = ::getrandom(out.data() + got, n - got, 0);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) throw DpError(fmt::format("cannot read random bytes from the kernel: {}", std::strerror(errno)));
    got += static_cast<size_t>(k);
  }
  return out;
}

std::string to_hex(const std::string& bytes) {
  static const char* digits = "0123456789abcdef";
  std::string out;
  out.reserve(bytes.size() * 2);
  for (unsigned char c : bytes) {
    out.push_back(digits[c >> 4]);
    out.push_back(digits[c & 15]);
  }
  return out;
}

std::string make_job_token() { return to_hex(random_bytes(32)); }

std::string hmac_sha256(const std::string& key, const std::string& msg) {
  unsigned char mac[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  const unsigned char* ok = HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()),
                                 reinterpret_cast<const unsigned char*>(msg.data()), msg.size(), mac, &len);
  DP_CHECK(ok != nullptr && len == kMacBytes, "HMAC-SHA256 failed in libcrypto");
  return std::string(reinterpret_cast<const char*>(mac), len);
}

bool same_bytes(const std::string& a, const std::string& b) {
  return a.size() == b.size() && CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

std::string job_id(const std::string& token) {
  if (token.empty()) return "";
  return to_hex(hmac_sha256(token, "dptrain job id")).substr(0, 12);
}

std::string token_proof(const std::string& token, const std::string& role, const std::string& nonce_a,
                        const std::string& nonce_b) {
  std::string msg = role;
  msg.push_back('\0');
  msg += nonce_a;
  msg += nonce_b;
  return hmac_sha256(token, msg);
}

std::string job_token_from_env(const char* v) {
  if (v == nullptr || *v == '\0') return "";
  const std::string t = v;
  // The value itself is never shown: it is a secret.
  if (t.size() < kMinTokenChars)
    DP_THROW_USER("DPTRAIN_JOB_TOKEN is {} characters long, fewer than {}: use a long random value (e.g. "
                  "`openssl rand -hex 32`), the same for every process of the job",
                  t.size(), kMinTokenChars);
  for (unsigned char c : t)
    if (c < 0x21 || c > 0x7e)
      DP_THROW_USER("DPTRAIN_JOB_TOKEN holds a character outside printable ASCII (code {}): use e.g. `openssl rand "
                    "-hex 32`",
                    static_cast<int>(c));
  return t;
}

}  // namespace dp
