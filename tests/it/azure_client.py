"""The Azure tests' own Blob Storage client (azure-storage-blob, installed beside moto), for
Azurite's well-known development account: what the tests put in the emulator and read back
does not go through neardup's client.

    python azure_client.py ENDPOINT create CONTAINER
    python azure_client.py ENDPOINT put CONTAINER NAME FILE
    python azure_client.py ENDPOINT get CONTAINER NAME          (exit 3 when there is no such blob)
    python azure_client.py ENDPOINT keys CONTAINER PREFIX       (one name per line, sorted)
    python azure_client.py ENDPOINT download CONTAINER PREFIX DIR
"""

import os
import sys

from azure.core.exceptions import ResourceNotFoundError
from azure.storage.blob import BlobServiceClient

# Azurite's published development account (the emulator's documentation gives it).
ACCOUNT = "devstoreaccount1"
KEY = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="


def main(endpoint, command, *args):
    service = BlobServiceClient.from_connection_string(
        f"DefaultEndpointsProtocol=http;AccountName={ACCOUNT};AccountKey={KEY};"
        f"BlobEndpoint={endpoint}/{ACCOUNT};"
    )
    if command == "create":
        service.create_container(args[0])
    elif command == "put":
        container, name, path = args
        with open(path, "rb") as f:
            service.get_blob_client(container, name).upload_blob(f, overwrite=True)
    elif command == "get":
        container, name = args
        try:
            body = service.get_blob_client(container, name).download_blob().readall()
        except ResourceNotFoundError:
            sys.exit(3)
        sys.stdout.buffer.write(body)
    elif command in ("keys", "download"):
        container, prefix = args[0], args[1]
        client = service.get_container_client(container)
        names = sorted(b.name for b in client.list_blobs(name_starts_with=prefix))
        if command == "keys":
            print("\n".join(names))
            return
        folder = args[2]
        for name in names:
            target = os.path.join(folder, name[len(prefix):].lstrip("/"))
            os.makedirs(os.path.dirname(target), exist_ok=True)
            with open(target, "wb") as f:
                f.write(client.download_blob(name).readall())
    else:
        sys.exit(f"unknown command {command}")


if __name__ == "__main__":
    main(*sys.argv[1:])
