package idem
