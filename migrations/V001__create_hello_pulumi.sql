-- The app's first table. One DDL change per file: MySQL commits DDL, so a file never half-rolls back.
CREATE TABLE IF NOT EXISTS hello_pulumi (
    id INT PRIMARY KEY,
    color VARCHAR(14) NOT NULL
);
