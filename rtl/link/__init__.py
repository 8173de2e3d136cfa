"""The host link: the framed byte protocol of docs/protocol.md, its engine and the UART."""
