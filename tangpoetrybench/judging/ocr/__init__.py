"""text-ocr: text integrity from a real OCR model (RapidOCR's PP-OCR models, offline).

    evaluator   the `text-ocr` evaluator
    evidence    the rules that turn OCR regions into evidence (leakage, fake characters)
    labels      drafting `text_labels.csv` from OCR results, and the OCR's Table 3
"""
