// defines: the job token, a secret every process of one job shares, and the proofs built from it
// (HMAC-SHA256 over fresh nonces, OpenSSL's libcrypto): a connection to rank 0's TCP store or to
// a ring listener proves it knows the token without ever sending it. The token's public
// fingerprint (job_id) names a job in messages ("the store at h:p belongs to job 3f2a91c0d4e5").
//
// Where the token comes from: `dptrain --nproc` creates one per launch and hands it to its
// workers in DPTRAIN_JOB_TOKEN; a torchrun-style launch or srun --mpi=none passes the user's
// DPTRAIN_JOB_TOKEN; without one, rank 0 creates one and shares it in the startup exchange (PMIx,
// PMI2: their own authenticated key-value store; file://: 0600 files; env/slurm without a token:
// the unauthenticated store, with a warning on a non-loopback address).
#pragma once
#include <cstddef>
#include <string>


namespace dp {

inline constexpr size_t kNonceBytes = 16;
inline constexpr size_t kMacBytes = 32;     // HMAC-SHA256
inline constexpr size_t kMinTokenChars = 16;

// n bytes from the kernel's CSPRNG (getrandom); DpError when it fails.
std::string random_bytes(size_t n);
// A fresh token: 32 random bytes as 64 lowercase hex digits.
std::string make_job_token();
// HMAC-SHA256(key, msg), 32 raw bytes.
std::string hmac_sha256(const std::string& key, const std::string& msg);
// Equal in constant time for equal lengths (a MAC comparison must not leak how much matched).
bool same_bytes(const std::string& a, const std::string& b);
// The token's public fingerprint: 12 hex digits of HMAC(token, "dptrain job id"); "" for "".
std::string job_id(const std::string& token);
// The proof that a party playing `role` ("store-client", "store-server", "ring-hello", ...)
// knows the token, bound to both nonces: HMAC(token, role | 0 | nonce_a | nonce_b).
std::string token_proof(const std::string& token, const std::string& role, const std::string& nonce_a,
                        const std::string& nonce_b);
// The value of DPTRAIN_JOB_TOKEN (`value`: nullptr when unset; "" for unset or empty). UserError
// when shorter than kMinTokenChars or holding anything but printable ASCII (a truncated or
// mangled variable).
std::string job_token_from_env(const char* value);
// "0123456789abcdef" for raw bytes.
std::string to_hex(const std::string& bytes);

}  // namespace dp
