"""TLS contexts from PEM material (:mod:`kubesched.net.tls`): each way material can be unusable is an error naming
the file or field it came from; good material makes contexts that complete a real handshake."""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any, TypeVar

import pytest

from kubesched.harness.certificates import write_server_certificates
from kubesched.net.tls import Pem, TlsError, client_context, server_context

T = TypeVar("T")
RunAsync = Callable[[Coroutine[Any, Any, T]], T]


@pytest.fixture(scope="module")
def material(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path]:
    return write_server_certificates(tmp_path_factory.mktemp("tls"))


def test_a_client_trusting_the_ca_completes_a_handshake_with_the_server(
    material: tuple[Path, Path, Path], run_async: RunAsync[str]
) -> None:
    ca, cert, key = material
    serving = server_context(Pem("--tls-cert", path=str(cert)), Pem("--tls-key", path=str(key)))
    trusting = client_context(ca=Pem("certificate-authority-data", data=ca.read_bytes()))

    async def scenario() -> str:
        served = asyncio.Event()

        async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            served.set()
            await reader.read()
            writer.close()

        server = await asyncio.start_server(serve, "127.0.0.1", 0, ssl=serving)
        port = server.sockets[0].getsockname()[1]
        try:
            _, writer = await asyncio.open_connection("127.0.0.1", port, ssl=trusting)
            version = str(writer.get_extra_info("ssl_object").version())
            await served.wait()
            writer.close()
            await writer.wait_closed()
            return version
        finally:
            server.close()
            await server.wait_closed()

    assert run_async(scenario()).startswith("TLSv1.")
    assert serving.minimum_version >= ssl.TLSVersion.TLSv1_2


@pytest.mark.parametrize(
    ("make", "message"),
    [
        pytest.param(
            lambda d: {"ca": Pem("caFile", path=str(d / "missing.pem"))},
            "remote OPA: caFile {d}/missing.pem: No such file or directory",
            id="ca-file-missing",
        ),
        pytest.param(
            lambda d: {"ca": Pem("caFile", path=str(d / "tls.key"))},
            "remote OPA: caFile {d}/tls.key: not a PEM certificate",
            id="ca-file-not-a-certificate",
        ),
        pytest.param(
            lambda d: {"ca": Pem("certificate-authority-data", data=b"\xff junk")},
            "remote OPA: certificate-authority-data: not a PEM certificate",
            id="ca-data-junk",
        ),
        pytest.param(
            lambda d: {
                "ca": Pem(
                    "caBundle", data=b"-----BEGIN CERTIFICATE-----\nbm90IGEgY2VydA==\n-----END CERTIFICATE-----\n"
                )
            },
            "remote OPA: caBundle: not a PEM certificate (",
            id="ca-data-broken-pem",
        ),
        pytest.param(
            lambda d: {"client": (Pem("client-certificate", path=str(d / "tls.crt")), Pem("client-key", data=b"x"))},
            "remote OPA: client-certificate {d}/tls.crt / client-key: not a PEM certificate and its private key (",
            id="key-data-junk",
        ),
        pytest.param(
            lambda d: {"client": (Pem("client-certificate", path=str(d / "tls.crt")), Pem("key", path=str(d / "no")))},
            "remote OPA: key {d}/no: No such file or directory",
            id="key-file-missing",
        ),
        pytest.param(
            lambda d: {"client": (Pem("cert", path=str(d / "ca.pem")), Pem("key", path=str(d / "tls.key")))},
            "remote OPA: cert {d}/ca.pem / key {d}/tls.key: not a PEM certificate and its private key (",
            id="key-of-another-certificate",
        ),
    ],
)
def test_unusable_client_material_is_an_error_naming_its_file_and_field(
    material: tuple[Path, Path, Path], make: Callable[[Path], dict[str, Any]], message: str
) -> None:
    directory = material[0].parent
    with pytest.raises(TlsError) as caught:
        client_context(**make(directory), where="remote OPA")
    assert str(caught.value).startswith(message.format(d=directory))


def test_client_material_given_as_data_is_loaded(material: tuple[Path, Path, Path]) -> None:
    ca, cert, key = material
    context = client_context(
        ca=Pem("certificate-authority-data", data=ca.read_bytes()),
        client=(Pem("client-certificate-data", data=cert.read_bytes()), Pem("client-key-data", data=key.read_bytes())),
    )
    assert context.verify_mode == ssl.CERT_REQUIRED and context.check_hostname
    assert [c["subject"] for c in context.get_ca_certs()] == [((("commonName", "kubesched test CA"),),)]


def test_without_verification_neither_certificate_nor_name_is_checked() -> None:
    context = client_context(verify=False)
    assert (context.verify_mode, context.check_hostname) == (ssl.CERT_NONE, False)


def test_a_server_certificate_that_is_not_pem_names_both_files(tmp_path: Path) -> None:
    cert, key = tmp_path / "c.pem", tmp_path / "k.pem"
    cert.write_text("junk")
    key.write_text("junk")
    with pytest.raises(TlsError) as caught:
        server_context(Pem("--tls-cert", path=str(cert)), Pem("--tls-key", path=str(key)))
    assert str(caught.value).startswith(
        f"--tls-cert {cert} / --tls-key {key}: not a PEM certificate and its private key ("
    )
