//! TLS for the HTTP engine: rustls server and client configurations (a
//! self-signed certificate made with rcgen when none is given, its SHA-256
//! fingerprint for the user), and kernel TLS: the `tls` ULP probe and the
//! `tls12_crypto_info_*` structures built from rustls's extracted secrets.

use super::HttpError;
use crate::proto::http::Trust;
use crate::sys::tls as ffi;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::ring as provider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::{ClientConfig, ConnectionTrafficSecrets, DigitallySignedStruct, ServerConfig};
use sha2::{Digest, Sha256};
use std::io;
use std::os::fd::RawFd;
use std::path::Path;
use std::sync::Arc;

/// A server's TLS set-up and what the user is told about it.
pub struct ServerTls {
    pub config: Arc<ServerConfig>,
    /// SHA-256 of the leaf certificate, `AB:CD:...`.
    pub fingerprint: String,
    /// The certificate in PEM when linerate made it (for `--cacert` users).
    pub generated_pem: Option<String>,
}

static VERSIONS: [&rustls::SupportedProtocolVersion; 2] =
    [&rustls::version::TLS13, &rustls::version::TLS12];

fn versions() -> &'static [&'static rustls::SupportedProtocolVersion] {
    &VERSIONS
}

pub fn fingerprint(der: &[u8]) -> String {
    Sha256::digest(der)
        .iter()
        .map(|b| format!("{b:02X}"))
        .collect::<Vec<_>>()
        .join(":")
}

/// The server's configuration: the given certificate and key (PEM), or a
/// self-signed one for `names` made now.
pub fn server_config(
    cert_key: Option<(&Path, &Path)>,
    names: &[String],
    ktls: bool,
) -> Result<ServerTls, HttpError> {
    let (chain, key, generated_pem) = match cert_key {
        Some((cert, key)) => {
            let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(cert)
                .map_err(|e| {
                    HttpError::Tls(format!("reading certificate {}: {e}", cert.display()))
                })?
                .collect::<Result<_, _>>()
                .map_err(|e| {
                    HttpError::Tls(format!("parsing certificate {}: {e}", cert.display()))
                })?;
            if chain.is_empty() {
                return Err(HttpError::Tls(format!(
                    "{}: no certificate in it; give a PEM file with the server certificate first",
                    cert.display()
                )));
            }
            let key = PrivateKeyDer::from_pem_file(key).map_err(|e| {
                HttpError::Tls(format!("reading private key {}: {e}", key.display()))
            })?;
            (chain, key, None)
        }
        None => {
            let ck = rcgen::generate_simple_self_signed(names.to_vec())
                .map_err(|e| HttpError::Tls(format!("making a self-signed certificate: {e}")))?;
            let der = ck.cert.der().clone();
            let key = PrivateKeyDer::try_from(ck.signing_key.serialize_der())
                .map_err(|e| HttpError::Tls(format!("encoding the generated key: {e}")))?;
            (vec![der], key, Some(ck.cert.pem()))
        }
    };
    let fp = fingerprint(chain[0].as_ref());
    let mut config = ServerConfig::builder_with_provider(Arc::new(provider::default_provider()))
        .with_protocol_versions(versions())
        .map_err(|e| HttpError::Tls(format!("TLS versions: {e}")))?
        .with_no_client_auth()
        .with_single_cert(chain, key)
        .map_err(|e| {
            HttpError::Tls(format!(
                "the certificate and key do not make a TLS server: {e}"
            ))
        })?;
    // kTLS takes the keys after the handshake; session tickets sent after
    // it would be records rustls wrote that the kernel never saw.
    config.enable_secret_extraction = ktls;
    if ktls {
        config.send_tls13_tickets = 0;
    }
    Ok(ServerTls {
        config: Arc::new(config),
        fingerprint: fp,
        generated_pem,
    })
}

/// Accepts any server certificate: `--insecure`, as curl has it, for
/// servers with self-signed certificates. Signatures are still checked.
#[derive(Debug)]
struct AnyCert(Arc<rustls::crypto::CryptoProvider>);

impl ServerCertVerifier for AnyCert {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }
    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }
    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }
    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

pub fn client_config(trust: &Trust, ktls: bool) -> Result<Arc<ClientConfig>, HttpError> {
    let provider = Arc::new(provider::default_provider());
    let b = ClientConfig::builder_with_provider(provider.clone())
        .with_protocol_versions(versions())
        .map_err(|e| HttpError::Tls(format!("TLS versions: {e}")))?;
    let mut config = match trust {
        Trust::Insecure => b
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(AnyCert(provider)))
            .with_no_client_auth(),
        Trust::CaPem(pem) => {
            let mut roots = rustls::RootCertStore::empty();
            for c in CertificateDer::pem_slice_iter(pem.as_bytes()) {
                let c =
                    c.map_err(|e| HttpError::Tls(format!("parsing the CA certificate: {e}")))?;
                roots.add(c).map_err(|e| {
                    HttpError::Tls(format!("the CA certificate is not usable: {e}"))
                })?;
            }
            if roots.is_empty() {
                return Err(HttpError::Tls(
                    "the --cacert file holds no certificate".into(),
                ));
            }
            b.with_root_certificates(roots).with_no_client_auth()
        }
    };
    config.enable_secret_extraction = ktls;
    Ok(Arc::new(config))
}

/// The record ciphers the kernel takes (linux/tls.h cipher types).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KtlsCipher {
    Aes128Gcm,
    Aes256Gcm,
    Chacha20Poly1305,
}

const TLS_1_2_VERSION: u16 = 0x0303;
const TLS_1_3_VERSION: u16 = 0x0304;

/// A `tls12_crypto_info_{aes_gcm_128,aes_gcm_256,chacha20_poly1305}` in the
/// kernel's layout: version, cipher type (native u16s), then iv, key, salt
/// and record sequence number. rustls's 12-byte IV is the kernel's 4-byte
/// salt and 8-byte iv for AES-GCM; ChaCha20 takes all 12 as its iv.
pub fn crypto_info(
    tls13: bool,
    cipher: KtlsCipher,
    key: &[u8],
    iv: &[u8],
    seq: u64,
) -> Result<Vec<u8>, HttpError> {
    let (ctype, key_len): (u16, usize) = match cipher {
        KtlsCipher::Aes128Gcm => (51, 16),
        KtlsCipher::Aes256Gcm => (52, 32),
        KtlsCipher::Chacha20Poly1305 => (54, 32),
    };
    if key.len() != key_len || iv.len() != 12 {
        return Err(HttpError::Tls(format!(
            "{cipher:?}: key of {} bytes and iv of {} (want {key_len} and 12)",
            key.len(),
            iv.len()
        )));
    }
    let version = if tls13 {
        TLS_1_3_VERSION
    } else {
        TLS_1_2_VERSION
    };
    let mut v = Vec::with_capacity(56);
    v.extend_from_slice(&version.to_ne_bytes());
    v.extend_from_slice(&ctype.to_ne_bytes());
    match cipher {
        KtlsCipher::Chacha20Poly1305 => {
            v.extend_from_slice(iv);
            v.extend_from_slice(key);
        }
        _ => {
            v.extend_from_slice(&iv[4..]);
            v.extend_from_slice(key);
            v.extend_from_slice(&iv[..4]);
        }
    }
    v.extend_from_slice(&seq.to_be_bytes());
    Ok(v)
}

/// The kernel structure for one direction of rustls's extracted secrets.
pub fn crypto_info_of(
    tls13: bool,
    seq: u64,
    s: &ConnectionTrafficSecrets,
) -> Result<Vec<u8>, HttpError> {
    let (cipher, key, iv) = match s {
        ConnectionTrafficSecrets::Aes128Gcm { key, iv } => (KtlsCipher::Aes128Gcm, key, iv),
        ConnectionTrafficSecrets::Aes256Gcm { key, iv } => (KtlsCipher::Aes256Gcm, key, iv),
        ConnectionTrafficSecrets::Chacha20Poly1305 { key, iv } => {
            (KtlsCipher::Chacha20Poly1305, key, iv)
        }
        _ => return Err(HttpError::Tls("no kernel TLS for this cipher suite".into())),
    };
    crypto_info(tls13, cipher, key.as_ref(), iv.as_ref(), seq)
}

/// Whether an error from setting the ULP means the kernel lacks it.
pub fn ulp_missing(e: &io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(libc::ENOENT) | Some(libc::ENOPROTOOPT)
    )
}

/// Puts the `tls` ULP on a socket before any TLS byte. When it cannot,
/// the reason goes into `note` (what the results say about kTLS) and the
/// connection carries TLS in user space.
pub fn set_ulp_or_note(fd: std::os::fd::RawFd, note: &std::sync::Mutex<Option<String>>) -> bool {
    match ffi::set_tls_ulp(fd) {
        Ok(()) => true,
        Err(e) => {
            if let Ok(mut n) = note.lock() {
                *n = Some(if ulp_missing(&e) {
                    crate::proto::http::KTLS_MISSING.to_string()
                } else {
                    format!("setting TCP_ULP tls: {e}")
                });
            }
            false
        }
    }
}

/// Probes for the `tls` ULP on a loopback connection of this namespace.
/// `Ok(())` when present; `Err` says why not (missing, or no loopback).
pub fn probe_ulp() -> Result<(), HttpError> {
    use std::net::{TcpListener, TcpStream};
    use std::os::fd::AsRawFd;
    let l = TcpListener::bind("127.0.0.1:0")
        .map_err(|e| HttpError::Tls(format!("no loopback to probe: {e}")))?;
    let addr = l
        .local_addr()
        .map_err(|e| HttpError::Tls(format!("no loopback to probe: {e}")))?;
    let c = TcpStream::connect(addr)
        .map_err(|e| HttpError::Tls(format!("no loopback to probe: {e}")))?;
    match ffi::set_tls_ulp(c.as_raw_fd()) {
        Ok(()) => Ok(()),
        Err(e) if ulp_missing(&e) => Err(HttpError::Tls(crate::proto::http::KTLS_MISSING.into())),
        Err(e) => Err(HttpError::Tls(format!(
            "kTLS probe: setting TCP_ULP tls: {e}"
        ))),
    }
}

/// Keeps the first connection's TLS version and cipher suite (all of one
/// test's connections negotiate the same).
pub fn remember_version(
    slot: &std::sync::Mutex<Option<(String, String)>>,
    tls: &rustls::CommonState,
) {
    if let Ok(mut g) = slot.lock() {
        if g.is_none() {
            *g = Some((
                tls.protocol_version()
                    .map(|v| format!("{v:?}"))
                    .unwrap_or_default(),
                tls.negotiated_cipher_suite()
                    .map(|s| format!("{:?}", s.suite()))
                    .unwrap_or_default(),
            ));
        }
    }
}

/// Hands both directions of a finished handshake to the kernel. On error
/// the connection is unusable (rustls gave its keys away).
pub fn enable_ktls(
    fd: RawFd,
    tls13: bool,
    secrets: rustls::ExtractedSecrets,
) -> Result<(), HttpError> {
    let tx = crypto_info_of(tls13, secrets.tx.0, &secrets.tx.1)?;
    let rx = crypto_info_of(tls13, secrets.rx.0, &secrets.rx.1)?;
    ffi::set_tls_keys(fd, ffi::TLS_TX, &tx).map_err(|e| ktls_error("TX", &e))?;
    ffi::set_tls_keys(fd, ffi::TLS_RX, &rx).map_err(|e| ktls_error("RX", &e))?;
    Ok(())
}

/// A refused kTLS key; ENOENT is the kernel's crypto layer without the
/// cipher (the tls module loaded, its AEAD's modules not), which a guest
/// or a minimal kernel shows and the bare errno does not explain.
fn ktls_error(dir: &str, e: &std::io::Error) -> HttpError {
    if e.kind() == std::io::ErrorKind::NotFound {
        return HttpError::Tls(format!(
            "kTLS {dir}: the kernel has the tls ULP but not the negotiated cipher ({e}): load \
             its crypto modules (modprobe gcm ghash_generic ctr chacha20poly1305), or leave \
             out --ktls"
        ));
    }
    HttpError::Tls(format!("kTLS {dir}: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::stderr::errln;

    #[test]
    fn crypto_info_layouts() {
        let key16: Vec<u8> = (0..16).collect();
        let key32: Vec<u8> = (0..32).collect();
        let iv: Vec<u8> = (100..112).collect();
        let a = crypto_info(true, KtlsCipher::Aes128Gcm, &key16, &iv, 1).unwrap();
        assert_eq!(a.len(), 40);
        assert_eq!(&a[0..2], &0x0304u16.to_ne_bytes());
        assert_eq!(&a[2..4], &51u16.to_ne_bytes());
        assert_eq!(&a[4..12], &iv[4..]);
        assert_eq!(&a[12..28], &key16[..]);
        assert_eq!(&a[28..32], &iv[..4]);
        assert_eq!(&a[32..40], &1u64.to_be_bytes());
        let b = crypto_info(false, KtlsCipher::Aes256Gcm, &key32, &iv, 0).unwrap();
        assert_eq!(b.len(), 56);
        assert_eq!(&b[0..2], &0x0303u16.to_ne_bytes());
        let c = crypto_info(true, KtlsCipher::Chacha20Poly1305, &key32, &iv, 7).unwrap();
        assert_eq!(c.len(), 56);
        assert_eq!(&c[4..16], &iv[..]);
        assert!(crypto_info(true, KtlsCipher::Aes128Gcm, &key32, &iv, 0).is_err());
    }

    #[test]
    fn from_rustls_secrets() {
        let s = ConnectionTrafficSecrets::Aes256Gcm {
            key: rustls::crypto::cipher::AeadKey::from([7u8; 32]),
            iv: rustls::crypto::cipher::Iv::new([9u8; 12]),
        };
        let v = crypto_info_of(true, 3, &s).unwrap();
        assert_eq!(v.len(), 56);
        assert_eq!(&v[48..56], &3u64.to_be_bytes());
    }

    #[test]
    fn self_signed_and_fingerprint() {
        let t = server_config(None, &["localhost".into()], true).unwrap();
        assert_eq!(t.fingerprint.len(), 32 * 3 - 1);
        let pem = t.generated_pem.unwrap();
        assert!(client_config(&Trust::CaPem(pem), false).is_ok());
        assert!(client_config(&Trust::Insecure, true).is_ok());
        assert!(client_config(&Trust::CaPem("nothing".into()), false).is_err());
    }

    /// The kTLS path on a kernel with the ULP; here it says why it skips.
    #[test]
    fn ktls_probe_reports() {
        match probe_ulp() {
            Ok(()) => errln!("tls ULP present"),
            Err(why) => errln!("kTLS live path skipped: {why}"),
        }
    }
}
