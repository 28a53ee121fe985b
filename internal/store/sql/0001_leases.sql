-- Leases: one row per lease name. The fencing token comes from one global
-- sequence, so a token is never reused and never lower than any token handed
-- out before, even after expired rows are deleted. CACHE 1 keeps nextval
-- ordered across sessions.
CREATE SEQUENCE {{schema}}.lease_token_seq AS bigint MINVALUE 1 NO CYCLE CACHE 1;

CREATE TABLE {{schema}}.leases (
    name        text        PRIMARY KEY CHECK (octet_length(name) BETWEEN 1 AND 255),
    owner       text        NOT NULL CHECK (octet_length(owner) BETWEEN 1 AND 255),
    token       bigint      NOT NULL CHECK (token > 0),
    acquired_at timestamptz NOT NULL,
    renewed_at  timestamptz NOT NULL,
    expires_at  timestamptz NOT NULL
) WITH (fillfactor = 50); -- room for HOT updates: renewals rewrite rows often

COMMENT ON TABLE {{schema}}.leases IS
    'leasehold leases. Expiry uses the database clock only. token is the fencing token.';
